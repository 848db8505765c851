"""Run one claimed job: resolve its task in the registry, call it, record the outcome."""

import asyncio
import logging
import time
from dataclasses import dataclass

from .context import _current_job
from .exceptions import Abort, InvalidJob, Reschedule, UnknownTask
from .registry import get_task

logger = logging.getLogger(__name__)


@dataclass
class RunResult:
    job: object
    outcome: str  # succeeded, failed, exhausted, rescheduled, or lost (lease lost meanwhile)
    duration_seconds: float


def run_job(job) -> RunResult:
    """Run a job returned by ``Job.objects.claim`` and apply its outcome (fenced).

    Only a function registered with ``@job`` under ``job.task_name`` is called; a row naming
    anything else fails with a clear error and is retried by its policy, in case a worker with
    newer code can run it. Exceptions derived from ``Exception`` fail the attempt;
    ``Reschedule`` and ``Abort`` do what they say. ``BaseException`` (KeyboardInterrupt,
    SystemExit) is not caught: the worker is stopping, and the job's lease will bring it back.
    """
    started = time.monotonic()
    try:
        task = get_task(job.task_name)
        args, kwargs = _arguments(job)
    except UnknownTask as exc:
        applied = job.fail(exc)
        return _finish(job, applied, started)
    except InvalidJob as exc:
        applied = job.fail(exc, retry=False)  # a broken row will not mend itself
        return _finish(job, applied, started)
    token = _current_job.set(job)
    try:
        if task.is_async:
            result = asyncio.run(task.func(*args, **kwargs))
        else:
            result = task.func(*args, **kwargs)
    except Reschedule as signal:
        applied = job.reschedule(run_at=signal.run_at, delay=signal.delay)
        return _finish(job, applied, started, "rescheduled")
    except Abort as exc:
        applied = job.fail(exc, retry=False)
        return _finish(job, applied, started)
    except Exception as exc:
        applied = job.fail(exc)
        return _finish(job, applied, started)
    finally:
        _current_job.reset(token)
    try:
        applied = job.complete(result)
    except InvalidJob as exc:
        applied = job.fail(exc)
    return _finish(job, applied, started)


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


def _finish(job, applied, started, outcome=None) -> RunResult:
    duration = time.monotonic() - started
    outcome = (outcome or job.status) if applied else "lost"
    log = logger.warning if outcome in ("failed", "exhausted", "lost") else logger.info
    log(
        "job finished task=%s id=%s attempt=%s outcome=%s duration_ms=%.1f",
        job.task_name, job.pk, job.attempts, outcome, duration * 1000,
    )
    return RunResult(job=job, outcome=outcome, duration_seconds=duration)
