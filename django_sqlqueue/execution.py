"""Run one claimed job: resolve its task in the registry, call it, record the outcome.

Calling the function (``call_task``) and writing its outcome (``apply_outcome``) are separate
steps, so that a worker can retry the write through a database outage without running the job
again.
"""

import logging
import time
from dataclasses import dataclass

from asgiref.sync import async_to_sync
from django.utils import timezone

from . import validation
from .context import _current_job
from .exceptions import Abort, InvalidJob, Reschedule, UnknownTask
from .registry import get_task

logger = logging.getLogger(__name__)
#: Task names of jobs enqueued through Django's Tasks framework (django_sqlqueue.backend) start
#: with this; the rest of the name is the module path of a django.tasks Task.
DJANGO_TASK_PREFIX = "django.tasks:"


@dataclass
class Outcome:
    """What a run produced, before it is written: one of succeeded / failed / aborted /
    rescheduled, with the result or the exception."""

    kind: str
    result: object = None
    error: BaseException | None = None
    run_at: object = None
    delay: object = None  # of a reschedule, or of the retry after a failure (None: the policy)
    duration_seconds: float = 0.0


@dataclass
class RunResult:
    job: object
    outcome: str  # succeeded, failed, exhausted, rescheduled, or lost (lease lost meanwhile)
    duration_seconds: float


def call_task(job) -> Outcome:
    """Call the job's registered function with its arguments. Touches no database.

    Only a function registered with ``@job`` under ``job.task_name`` is called; a row naming
    anything else fails with a clear error (and is retried by its policy, in case a worker with
    newer code can run it). A malformed payload is aborted: it will not mend itself. Exceptions
    derived from ``Exception`` fail the attempt; ``BaseException`` (KeyboardInterrupt,
    SystemExit) is not caught: the worker is stopping, and the job's lease will bring it back.
    """
    started = time.monotonic()
    outcome = _call(job)
    outcome.duration_seconds = time.monotonic() - started
    return outcome


def _call(job) -> Outcome:
    if job.task_name.startswith(DJANGO_TASK_PREFIX):
        from .backend import call_django_task  # only with Django 6's django.tasks

        return call_django_task(job)
    try:
        task = get_task(job.task_name)
        args, kwargs = _arguments(job)
    except UnknownTask as exc:
        return Outcome("failed", error=exc)
    except InvalidJob as exc:
        return Outcome("aborted", error=exc)
    token = _current_job.set(job)
    try:
        if task.is_async:
            # async_to_sync, not asyncio.run: the async ORM's sync_to_async calls then run on
            # this thread, whose connection the worker checks and replaces when it breaks.
            result = async_to_sync(task.func)(*args, **kwargs)
        else:
            result = task.func(*args, **kwargs)
    except Reschedule as signal:
        try:  # a bad delay fails the attempt here, instead of breaking the outcome write
            validation.run_at(signal.run_at, signal.delay, timezone.now())
        except InvalidJob as exc:
            return Outcome("failed", error=exc)
        return Outcome("rescheduled", run_at=signal.run_at, delay=signal.delay)
    except Abort as exc:
        return Outcome("aborted", error=exc)
    except Exception as exc:
        return Outcome("failed", error=exc)
    finally:
        _current_job.reset(token)
    try:
        validation.check_json(result, "the result")
    except InvalidJob as exc:
        # The function ran to the end, side effects and all: running it again would repeat
        # them, so the job ends exhausted with the reason instead of being retried.
        return Outcome("aborted", error=exc)
    return Outcome("succeeded", result=result)


def apply_outcome(job, outcome: Outcome) -> bool:
    """Write the outcome (fenced). False if the job is no longer this claim's."""
    if outcome.kind == "succeeded":
        return job.complete(outcome.result)
    if outcome.kind == "rescheduled":
        return job.reschedule(run_at=outcome.run_at, delay=outcome.delay)
    return job.fail(outcome.error, retry=outcome.kind == "failed", delay=outcome.delay)


def run_job(job) -> RunResult:
    """Run a job returned by ``Job.objects.claim`` and write its outcome."""
    outcome = call_task(job)
    applied = apply_outcome(job, outcome)
    return report(job, outcome, applied)


def report(job, outcome: Outcome, applied: bool) -> RunResult:
    """Log one key=value line for the outcome and return it as a RunResult."""
    if not applied:
        kind = "lost"
    elif outcome.kind == "rescheduled":
        kind = "rescheduled"
    else:
        kind = job.status
    log = logger.warning if kind in ("failed", "exhausted", "lost") else logger.info
    error = f" error={type(outcome.error).__name__}" if outcome.error is not None else ""
    log(
        "job finished task=%s id=%s attempt=%s outcome=%s duration_ms=%.1f%s",
        job.task_name, job.pk, job.attempts, kind, outcome.duration_seconds * 1000, error,
    )
    return RunResult(job=job, outcome=kind, duration_seconds=outcome.duration_seconds)


def _arguments(job):
    payload = job.payload
    if not isinstance(payload, dict):
        raise InvalidJob(
            f'job {job.pk} has payload {payload!r}; it must be a JSON object '
            '{"args": [...], "kwargs": {...}}.'
        )
    args, kwargs = payload.get("args", []), payload.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise InvalidJob(
            f'job {job.pk} has a malformed payload {payload!r}: "args" must be a JSON array and '
            '"kwargs" a JSON object.'
        )
    return args, kwargs
