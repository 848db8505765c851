"""The job being run, for code deep inside a job function (logging, idempotency keys)."""

from contextvars import ContextVar

_current_job: ContextVar = ContextVar("django_sqlqueue_current_job", default=None)
#: The durable steps of the current run (``run/steps.py``): None until its first step, so a run
#: that takes none reads nothing. The runner sets it to None at each run's start.
_current_steps: ContextVar = ContextVar("django_sqlqueue_current_steps", default=None)


def current_job():
    """The Job this code runs as (with ``pk`` and ``attempts``), or None outside a job."""
    return _current_job.get()
