"""What happens to a claimed job after it ran. Every write here is fenced.

A fenced write updates the row only ``WHERE id = job.id AND status = 'running' AND claim_token =
job.claim_token``. The token is new at every claim, so once a job's lease was lost (the job was
rescued, released, or claimed again by another worker) the old worker's outcome updates no row and
the call returns False: the new owner's work is never overwritten.
"""

import datetime as dt
import traceback as tb

from django.db.models import F
from django.utils import timezone

from . import validation
from .conf import get_settings
from .exceptions import InvalidSchedule
from .retry import retry_delay_seconds
from .statuses import JobStatus


def _fenced_update(job, *, also=None, **values) -> bool:
    from .models import Job

    fence = {"pk": job.pk, "status": JobStatus.RUNNING, "claim_token": job.claim_token}
    updated = (
        Job.objects.using(job._state.db or None)
        .filter(**fence, **(also or {}))
        .update(**values)
    )
    if updated:
        for name, value in values.items():
            if not hasattr(value, "resolve_expression"):
                setattr(job, name, value)
    return updated == 1


def complete(job, result=None, *, now=None) -> bool:
    """running -> succeeded, storing ``result`` (which must be plain JSON)."""
    validation.check_json(result, "the result")
    applied = _fenced_update(
        job,
        status=JobStatus.SUCCEEDED,
        result=result,
        finished_at=now or timezone.now(),
        lease_expires_at=None,
    )
    return applied


def error_entry(job, error, *, now, traceback_text=None) -> dict:
    """The record of one failed attempt, as kept in ``Job.errors``."""
    if isinstance(error, BaseException):
        kind = f"{type(error).__module__}.{type(error).__qualname__}"
        message = str(error) or kind
        if traceback_text is None and error.__traceback__ is not None:
            traceback_text = "".join(tb.format_exception(type(error), error, error.__traceback__))
    else:
        kind, message = "error", str(error)
    limit = get_settings().MAX_TRACEBACK_CHARS
    return {
        "attempt": job.attempts,
        "at": now.isoformat(),
        "type": kind,
        "message": message[:limit],
        "traceback": (traceback_text or "")[-limit:],
        "worker": job.claimed_by or "",
    }


def fail(job, error, *, retry=True, delay=None, now=None, traceback_text=None) -> bool:
    """running -> failed (runs again after ``delay`` seconds, by default the job's backoff
    policy), or -> exhausted when no attempts are left or ``retry`` is False. The error is
    appended to ``job.errors``."""
    now = now or timezone.now()
    delay = delay if delay is not None else retry_delay_seconds(
        job.attempts,
        backoff=job.retry_backoff_seconds,
        min_delay=job.retry_min_delay_seconds,
        max_delay=job.retry_max_delay_seconds,
        jitter=job.retry_jitter,
    )
    entry = error_entry(job, error, now=now, traceback_text=traceback_text)
    retry_at = now + dt.timedelta(seconds=delay) if retry else None
    return _record_failure(job, entry, retry_at=retry_at, now=now)


class WorkerLost(Exception):  # noqa: N818 - recorded as the error type of a lost attempt
    """The worker running this attempt stopped renewing its lease (killed, hung, machine gone)."""


def rescue(job, *, now=None, reason="its lease expired") -> bool:
    """running -> failed (due now) or exhausted: the attempt is lost with its worker.

    Fenced on the lease as read, so a heartbeat that renews the lease meanwhile wins the race.
    """
    now = now or timezone.now()
    lost = WorkerLost(
        f"worker {job.claimed_by or '?'} was lost while running attempt {job.attempts} "
        f"({reason}); the attempt counts as failed."
    )
    entry = error_entry(job, lost, now=now)
    return _record_failure(
        job, entry, retry_at=now, now=now, also={"lease_expires_at": job.lease_expires_at}
    )


def _record_failure(job, entry, *, retry_at, now, also=None) -> bool:
    """Append ``entry`` to the job's errors; retry at ``retry_at`` if attempts are left."""
    errors = [*(job.errors or []), entry]
    if retry_at is not None and job.attempts < job.max_attempts:
        return _fenced_update(
            job, also=also, status=JobStatus.FAILED, run_at=retry_at, errors=errors,
            lease_expires_at=None,
        )
    return _fenced_update(
        job, also=also, status=JobStatus.EXHAUSTED, errors=errors, finished_at=now,
        lease_expires_at=None,
    )


def reschedule(job, *, run_at=None, delay=None, now=None) -> bool:
    """running -> queued at ``run_at`` (or now + ``delay``), not counted as a failure.

    Attempts never go down, so the attempt just made is given back by raising max_attempts.
    """
    now = now or timezone.now()
    if run_at is None and delay is None:
        raise InvalidSchedule("reschedule() needs run_at or delay.")
    when = validation.run_at(run_at, delay, now)
    return _give_back(job, run_at=when)


def release(job, *, now=None) -> bool:
    """running -> queued, due now, without counting the attempt (e.g. on worker shutdown)."""
    return _give_back(job, run_at=now or timezone.now())


def _give_back(job, *, run_at) -> bool:
    applied = _fenced_update(
        job,
        status=JobStatus.QUEUED,
        run_at=run_at,
        max_attempts=F("max_attempts") + 1,
        lease_expires_at=None,
    )
    if applied:
        job.max_attempts += 1
    return applied
