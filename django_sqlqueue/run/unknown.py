"""A job whose task this worker does not know: given back for a worker that knows it.

During a rolling deploy, workers with the old code run beside workers with the new: a job of a
task added by the new code reaches an old worker, whose registry raises ``UnknownTask``. That is
not the job's fault, so the old worker gives it back without using an attempt (a reschedule:
``max_attempts`` goes up with ``attempts``), due ``UNKNOWN_TASK_DELAY_SECONDS`` later.

Why a delay, and why 5 s by default: given back due now, the job would be the first ready job
again and the same old worker would claim it straight back, a busy loop of claims and writes
for as long as the deploy lasts; 5 s lets a worker that knows the task claim it first (every
worker polls at least every ``POLL_INTERVAL_SECONDS``, 1 s), costs such a job at most a few
seconds, and an old worker bounces each such job at most 12 times a minute.

The bound, like ``max_interruptions`` but in time, so that a deploy of several minutes never
uses it up: a job is given back until its task has been unknown for ``UNKNOWN_TASK_MAX_SECONDS``
(1 hour by default: longer than any rolling deploy, short enough that a task name nobody will
ever know, a typo or a removed task, ends visibly the same day). It is measured from the first
give-back of the streak, the one entry it writes to ``errors`` (``"unknown_task": true``); the
give-backs after it write nothing. Past the bound the job ends exhausted with ``UnknownTask``
and the reason. ``retry_now()`` queues such a job again as any other.

Each worker process logs once per task name that it gives such jobs back.
"""

import datetime as dt
import logging
import threading

from django.utils import timezone

from ..conf import get_settings
from ..exceptions import UnknownTask

logger = logging.getLogger("django_sqlqueue.runner")  # the runner's, whose outcome this is

#: The key that marks the ``errors`` entry of a streak's first give-back.
MARK = "unknown_task"

_told: set = set()  # task names this process logged
_told_lock = threading.Lock()


def verdict(job, error: UnknownTask, *, now=None) -> float | UnknownTask:
    """Seconds after which ``job`` (whose task raised ``error``) is due again, given back; or,
    past the bound, the ``UnknownTask`` it ends with."""
    settings = get_settings()
    now = now or timezone.now()
    started = streak_started_at(job)
    if started is not None and (now - started).total_seconds() > settings.UNKNOWN_TASK_MAX_SECONDS:
        return UnknownTask(
            f"{error} No worker that took this job knew its task for "
            f"{(now - started).total_seconds():.0f}s, longer than UNKNOWN_TASK_MAX_SECONDS "
            f"({settings.UNKNOWN_TASK_MAX_SECONDS:g}s): it is not given back again.")
    _tell_once(job.task_name, settings)
    return settings.UNKNOWN_TASK_DELAY_SECONDS


def streak_started_at(job) -> dt.datetime | None:
    """When the job's task was first found unknown in its current streak: the time of its last
    ``errors`` entry if that is a give-back's (nothing else was recorded since), else None."""
    errors = job.errors or []
    last = errors[-1] if errors and isinstance(errors[-1], dict) else {}
    if not last.get(MARK):
        return None
    try:
        return dt.datetime.fromisoformat(last["at"])
    except (KeyError, TypeError, ValueError):
        return None


def entry_message(job, error) -> str:
    """The message of a streak's first ``errors`` entry."""
    settings = get_settings()
    return (f"given back without using an attempt, for a worker that knows the task (every "
            f"{settings.UNKNOWN_TASK_DELAY_SECONDS:g}s, for up to "
            f"{settings.UNKNOWN_TASK_MAX_SECONDS:g}s: UNKNOWN_TASK_MAX_SECONDS): worker "
            f"{job.claimed_by or '?'} does not know it, its code older than the job's? {error}")


def _tell_once(name: str, settings) -> None:
    with _told_lock:
        if name in _told:
            return
        _told.add(name)
    logger.warning(
        "task %r is not registered in this worker process (is its code older than the job's, "
        "in a rolling deploy?): its jobs are given back without using an attempt, due %gs "
        "later, for a worker that knows it, until they have been unknown for %gs "
        "(UNKNOWN_TASK_MAX_SECONDS); logged once per task name", name,
        settings.UNKNOWN_TASK_DELAY_SECONDS, settings.UNKNOWN_TASK_MAX_SECONDS)
