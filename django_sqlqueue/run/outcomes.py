"""What each outcome writes to a claimed job's row, and the one fenced write that does it.

An outcome (``runner.Outcome``) becomes a :class:`Transition`: the status and the values to
write. :func:`write` writes any number of transitions in one statement, each fenced: a row is
updated only ``WHERE id = job.id AND status = 'running' AND claim_token = job.claim_token``. The
token is new at every claim, so once a job's lease was lost (rescued, released, claimed again by
another worker) the old claim's outcome updates no row, and the new owner's work is never
overwritten. ``Job.complete()``, ``fail()``, ``reschedule()`` and ``release()``, the worker's
outcome writer and the transactional lane all write through here.
"""

import datetime as dt
import traceback as tb
from typing import NamedTuple

from django.db import connections, transaction
from django.utils import timezone

from .. import signals
from ..conf import get_settings
from ..db import ops, returning
from ..db.pieces import OutcomeRow
from ..enqueue import validation
from ..exceptions import InvalidSchedule, UnknownTask
from ..statuses import INTERRUPTION_FINAL, INTERRUPTION_RUNS_AGAIN, JobStatus
from ..transitions import changes
from ..transitions.settle import settle
from . import unknown
from .retry import retry_delay_seconds
from .runner import Outcome, OutcomeKind


class Transition(NamedTuple):  # a tuple: one is made per finished job, on the hot path
    """What one outcome writes to a running job's row (None: leave the column as it is)."""

    status: JobStatus
    result: object = None  # stored for succeeded; NULL otherwise
    errors: list | None = None  # the whole list, with this attempt's entry appended
    run_at: dt.datetime | None = None  # when it runs again
    finished_at: dt.datetime | None = None  # set for final statuses
    give_back: bool = False  # not counted as an attempt: max_attempts goes up by one
    interrupted: bool = False  # counted as an interruption: interruptions goes up by one


def transition(job, outcome: Outcome, *, now=None, result_checked=False) -> Transition:
    """The transition of ``outcome`` for ``job`` (with its attempts as claimed).
    ``result_checked``: the runner already checked that the result is JSON."""
    now = now or timezone.now()
    kind = outcome.kind
    if kind == OutcomeKind.SUCCEEDED:
        if not result_checked:
            validation.check_json(outcome.result, "the result")
        return Transition(JobStatus.SUCCEEDED, result=outcome.result, finished_at=now)
    if kind == OutcomeKind.RESCHEDULED:
        if outcome.run_at is None and outcome.delay is None:
            raise InvalidSchedule("reschedule() needs run_at or delay.")
        return Transition(JobStatus.QUEUED, run_at=validation.run_at(outcome.run_at,
                                                                     outcome.delay, now),
                          give_back=True, errors=unknown_task_errors(job, outcome.error, now))
    if kind == OutcomeKind.INTERRUPTED:
        return interruption(job, outage_reason(job, outcome.error, counted=outcome.counted),
                            now=now, error=outcome.error, counted=outcome.counted)
    errors = [*(job.errors or []), error_entry(job, outcome.error, now=now)]
    if kind == OutcomeKind.CANCELLED:
        return Transition(JobStatus.CANCELLED, errors=errors, finished_at=now)
    if kind == OutcomeKind.FAILED and job.attempts < job.max_attempts:
        delay = outcome.delay if outcome.delay is not None else retry_delay_seconds(
            job.attempts,
            backoff=job.retry_backoff_seconds,
            min_delay=job.retry_min_delay_seconds,
            max_delay=job.retry_max_delay_seconds,
            jitter=job.retry_jitter,
        )
        return Transition(JobStatus.FAILED, errors=errors,
                          run_at=now + dt.timedelta(seconds=delay))
    return Transition(JobStatus.EXHAUSTED, errors=errors, finished_at=now)


def unknown_task_errors(job, error, now) -> list | None:
    """The errors of a job given back by a worker that does not know its task (``error``):
    with an entry for the first give-back of a streak only (run/unknown.py); None otherwise."""
    if not isinstance(error, UnknownTask) or unknown.streak_started_at(job) is not None:
        return None
    entry = error_entry(job, error, now=now)
    entry.update(message=unknown.entry_message(job, error)[:get_settings().MAX_TRACEBACK_CHARS],
                 **{unknown.MARK: True})
    return [*(job.errors or []), entry]


def released(now=None) -> Transition:
    """Back to queued, due now, the attempt not counted (a job its worker claimed but did not
    start)."""
    return Transition(JobStatus.QUEUED, run_at=now or timezone.now(), give_back=True)


def interruption(job, why: str, *, now=None, error=None, counted=True) -> Transition:
    """A run cut short by the infrastructure, not by the job: back to queued, due now, the
    attempt given back, with an entry in its errors that says ``why``. ``counted``: it raises
    ``interruptions``, and the one that reaches ``max_interruptions`` ends the job exhausted
    instead (a job that keeps killing its workers is not run forever); a shutdown's release, and
    a run cut short by an outage (the database could not be reached, or restarted), are not
    counted, since they say nothing about the job. ``error``: the exception that cut it
    (its type and traceback are recorded), else ``WorkerLost``'s place is taken by
    ``WorkerStopped``."""
    now = now or timezone.now()
    count = job.interruptions + 1 if counted else job.interruptions
    final = counted and count >= job.max_interruptions
    if counted:
        why += (f"; interruption {count} of {job.max_interruptions}"
                + (INTERRUPTION_FINAL if final else INTERRUPTION_RUNS_AGAIN))
    else:
        why += INTERRUPTION_RUNS_AGAIN.replace(":", ";", 1)
    entry = interruption_entry(job, why, error=error or WorkerStopped(why), now=now)
    errors = [*(job.errors or []), entry]
    if final:
        return Transition(JobStatus.EXHAUSTED, errors=errors, finished_at=now, interrupted=True)
    return Transition(JobStatus.QUEUED, errors=errors, run_at=now, give_back=True,
                      interrupted=counted)


def outage_reason(job, error, *, counted=True) -> str:
    """Why a run was interrupted by its database going away (an ``interruption``'s ``why``);
    ``counted``: the database answered right after, else it could not be reached or had
    restarted meanwhile (an outage)."""
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return (f"the database went away while worker {job.claimed_by or '?'} ran attempt "
            f"{job.attempts} ({type(error).__name__}: {first_line})"
            + ("" if counted else "; it could not be reached or had restarted: an outage, not "
               "counted towards max_interruptions"))


def write(changes: list, alias: str, *, retried: bool = True) -> set:
    """Write ``[(job, Transition), ...]`` of running jobs claimed on ``alias`` in one fenced
    statement; return the pks it updated, and update those jobs in memory. The others were no
    longer their claim's. Each job appears once: the pks could not tell two of its claims apart
    (the worker's outcome writer sends them in statements of their own). A job whose cancel was
    asked for is written ``cancelled`` whatever its transition (``record_outcomes``); its
    status in memory says so. ``retried``: send ``job_retried`` now (the transactional lane
    sends it after its commit instead)."""
    if not changes:
        return set()
    connection = connections[alias]
    model = type(changes[0][0])
    statement, params = ops(connection).record_outcomes(model, outcomes=[
        OutcomeRow(job.pk, job.claim_token, change.status.value, change.result, change.errors,
                   change.run_at, change.finished_at, change.give_back, change.interrupted)
        for job, change in changes
    ])
    in_workflows = {job.pk for job, _ in changes if job.workflow_id is not None}
    if in_workflows:
        # A workflow's job: its children are released (or cancelled) in the same transaction
        # as its final status (transitions/settle.py). Other batches never come here.
        with transaction.atomic(using=alias):
            written = dict(returning.fetch(connection, statement, params))
            settle(model, alias, {pk: status for pk, status in written.items()
                                  if pk in in_workflows})
    else:
        written = dict(returning.fetch(connection, statement, params))  # id -> status written
    for job, change in changes:
        if job.pk in written:
            apply(job, change, written[job.pk])
            if job.status == JobStatus.CANCELLED and job.finished_at is None:
                job.finished_at = timezone.now()  # the database's time differs a little
    applied = set(written)
    if retried:
        send_retried(changes, applied, model)
    return applied


def apply(job, change: Transition, status) -> None:
    """``change``, written with ``status``, onto ``job`` in memory, as the row now has it."""
    job.status = status
    job.result = change.result
    job.lease_expires_at = None
    job.finished_at = change.finished_at
    if change.errors is not None:
        job.errors = change.errors
    if change.run_at is not None:
        job.run_at = change.run_at
    if change.give_back:
        job.max_attempts += 1
    if change.interrupted:
        job.interruptions += 1


def send_retried(changes, applied, model) -> None:
    """``job_retried`` for each written failure that runs again (an attempt given back by a
    reschedule or a release is not a retry)."""
    if not signals.has_receivers(signals.job_retried, model):
        return
    for job, change in changes:
        # job.status is what was written: a cancelled job's failure is not a retry.
        if (job.pk in applied and job.status == JobStatus.FAILED
                and signals.is_job_function(job)):
            signals.send(signals.job_retried, model, job=job, error=change.errors[-1])


def write_one(job, change: Transition) -> bool:
    """``write`` for one job, on the database it was claimed from."""
    return job.pk in write([(job, change)], job._state.db or "default")


def complete(job, result=None, *, now=None) -> bool:
    """running -> succeeded, storing ``result`` (which must be plain JSON)."""
    return write_one(job, transition(job, Outcome(OutcomeKind.SUCCEEDED, result=result),
                                     now=now))


def fail(job, error, *, retry=True, delay=None, now=None) -> bool:
    """running -> failed (runs again after ``delay`` seconds, by default the job's backoff
    policy), or -> exhausted when no attempts are left or ``retry`` is False. The error is
    appended to ``job.errors``."""
    kind = OutcomeKind.FAILED if retry else OutcomeKind.ABORTED
    return write_one(job, transition(job, Outcome(kind, error=error, delay=delay), now=now))


def reschedule(job, *, run_at=None, delay=None, now=None) -> bool:
    """running -> queued at ``run_at`` (or now + ``delay``), not counted as a failure.

    Attempts never go down, so the attempt just made is given back by raising max_attempts.
    """
    outcome = Outcome(OutcomeKind.RESCHEDULED, run_at=run_at, delay=delay)
    return write_one(job, transition(job, outcome, now=now))


def release(job, *, now=None) -> bool:
    """running -> queued, due now, without counting the attempt (e.g. on worker shutdown)."""
    return write_one(job, released(now))


def interruption_entry(job, why: str, *, error, now) -> dict:
    """The record of one interrupted attempt: an ``error_entry`` whose message is ``why``, marked
    ``"interrupted": true`` (the rescue's SQL writes the same shape)."""
    entry = error_entry(job, error, now=now)
    limit = get_settings().MAX_TRACEBACK_CHARS
    entry.update(message=why[:limit], interrupted=True)
    return entry


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


class WorkerLost(Exception):  # noqa: N818 - recorded as the error type of a lost attempt
    """The worker running this attempt stopped renewing its lease (killed, hung, machine gone):
    an interruption, not a failure of the job."""


class WorkerStopped(Exception):  # noqa: N818 - recorded as the error type of a released run
    """The worker running this attempt shut down before it finished, and gave the job back."""


def rescue(job, *, now=None, reason="its lease expired") -> bool:
    """running -> queued (due now, the attempt given back), or exhausted at its
    max_interruptions: the run was interrupted by the loss of its worker.

    ``JobQuerySet.rescue`` for this one job, which writes the ``WorkerLost`` entry ("worker ...
    was lost while running attempt N (reason); interruption 1 of 3: the job runs again, the
    attempt not counted."). Fenced on the
    claim token and on the lease as read: a lease renewed by a heartbeat meanwhile is later, and
    wins the race. When applied, the job's changed fields are read back.
    """
    lease = ({"lease_expires_at__isnull": True} if job.lease_expires_at is None
             else {"lease_expires_at__lte": job.lease_expires_at})
    jobs = type(job)._default_manager.using(job._state.db or None).filter(
        pk=job.pk, claim_token=job.claim_token, **lease
    )
    applied = changes.rescue(jobs, now, reason=reason, limit=1) == 1
    if applied:
        job.refresh_from_db(fields=["status", "run_at", "finished_at", "lease_expires_at",
                                    "errors"])
    return applied
