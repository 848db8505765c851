"""Gunicorn's server hooks that run the embedded worker in each of its worker processes::

    # gunicorn.conf.py
    from django_sqlqueue.embedded.gunicorn import post_worker_init, worker_exit  # noqa: F401

Gunicorn reads hooks from the config file's names, imported ones included. Both do nothing
while ``SQLQUEUE["EMBEDDED_WORKER"]`` is off. Where things run:

- The arbiter (gunicorn's master process) runs no worker: it forks the web workers, and threads
  must not be running across a fork (``--preload`` included).
- Each web worker process (``--workers N``) runs one embedded worker with its own job threads,
  started once the process has loaded the application (``post_worker_init``) and stopped as it
  exits (``worker_exit``): on SIGTERM or SIGINT to gunicorn, a ``--max-requests`` recycle, a
  HUP reload. Maintenance and schedules are shared as between any workers: one leader does
  maintenance, and each schedule's tick is enqueued once.
- Sync and gthread workers alike: the job threads are the worker's own, beside the request
  handling, which never waits for them.

The stop must end before the arbiter kills the process: ``graceful_timeout`` after a SIGTERM,
``timeout`` after the process's last notice to it (a recycle). The jobs' shutdown timeout is
therefore cut to the smaller of the two minus ``MARGIN_SECONDS`` for the rest of the stop.
"""

#: What the stop needs past the running jobs' shutdown timeout: give back the jobs still running,
#: write the outcomes waiting for their batch, unregister.
MARGIN_SECONDS = 5.0


def post_worker_init(worker):
    """Start the embedded worker in this web worker process (a gunicorn server hook)."""
    from . import options, thread

    if not options.enabled():
        return
    limit = max(0.0, min(worker.cfg.graceful_timeout, worker.cfg.timeout) - MARGIN_SECONDS)
    wanted = options.worker_config().shutdown_timeout
    if wanted > limit:
        worker.log.warning(
            "django-sqlqueue: the embedded worker's shutdown timeout is cut from %gs to %gs, "
            "below gunicorn's graceful_timeout (%gs) and timeout (%gs): raise those to give "
            "running jobs longer", wanted, limit, worker.cfg.graceful_timeout, worker.cfg.timeout)
    thread.start(shutdown_timeout=min(wanted, limit))


def worker_exit(server, worker):
    """Stop the embedded worker of this web worker process gracefully (a gunicorn server hook,
    run in the exiting worker)."""
    from . import thread

    thread.stop()
