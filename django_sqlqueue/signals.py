"""Django signals for ``@job`` jobs: enqueued, started, finished, retried, rescued.

Each is sent once per event, by the one module that owns the event, with ``sender`` the Job
model class, and always with ``send_robust``: a receiver that raises is logged (on this
module's logger, with its traceback) and never fails the enqueue, the job or its outcome write.
Jobs of the ``django.tasks`` backend get Django's own ``task_enqueued`` / ``task_started`` /
``task_finished`` instead, from the backend's adapter.

================ ============================= ===================================================
Signal           Sent by, where                Arguments (besides ``sender``)
================ ============================= ===================================================
``job_enqueued`` ``inserting.insert_jobs``,     ``job``: the inserted Job (it has its pk)
                 the enqueuing thread, right
                 after the INSERT (inside the
                 caller's transaction, if any)
``job_started``  ``runner``, the job's thread,  ``job``: the claimed Job (``attempts`` counts this
                 just before the function runs  attempt)
``job_finished`` ``runner``, the job's thread,  ``job``, ``outcome`` (``runner.OutcomeKind``:
                 when the function returned or  succeeded, failed, aborted, rescheduled),
                 raised, before the outcome is  ``exception`` (or None), ``will_retry``,
                 written; for an exception      ``result`` (of a success)
                 inside its ``except`` block
``job_retried``  ``outcomes.write``, the thread ``job`` (as written: status failed,
                 that wrote the outcome (the    ``run_at`` when it runs again), ``error``: the
                 worker's outcome writer), once attempt's entry in ``job.errors``
                 the failure is written
``job_rescued``  ``JobQuerySet.rescue`` (the    ``job`` (as written: failed and due now, or
                 rescuer, the reaper,           exhausted), ``will_retry``, ``reason``
                 ``outcomes.rescue``), once the
                 rescue committed
================ ============================= ===================================================
"""

import logging

from django.dispatch import Signal

logger = logging.getLogger(__name__)

#: The task names of the django.tasks backend's jobs (``backend.DJANGO_TASK_PREFIX``, which
#: this module cannot import; a test pins the two together): they get Django's signals.
DJANGO_TASKS_PREFIX = "django.tasks:"

job_enqueued = Signal()
job_started = Signal()
job_finished = Signal()
job_retried = Signal()
job_rescued = Signal()


def has_receivers(signal: Signal, sender) -> bool:
    """Whether sending ``signal`` from ``sender`` would call anyone: the hot paths (a worker
    runs thousands of attempts a second) skip building the arguments otherwise."""
    return bool(signal.receivers) and signal.has_listeners(sender)


def is_job_function(job) -> bool:
    """Whether ``job`` runs a ``@job`` function (not a django.tasks task)."""
    return not job.task_name.startswith(DJANGO_TASKS_PREFIX)


def send(signal: Signal, sender, **kwargs) -> None:
    """Send ``signal``; log, never raise, what its receivers raise."""
    for receiver, response in signal.send_robust(sender, **kwargs):
        if isinstance(response, Exception):
            logger.error("signal receiver %s failed (the job is not affected)",
                         getattr(receiver, "__qualname__", receiver),
                         exc_info=(type(response), response, response.__traceback__))
