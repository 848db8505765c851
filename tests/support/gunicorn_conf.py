"""The test gunicorn's config file, as docs/operations.md shows it: the embedded worker's hooks."""

from django_sqlqueue.embedded.gunicorn import post_worker_init, worker_exit  # noqa: F401
