"""Durable steps (docs/steps.md): inside a job, ``step("name", function, *args)`` calls the
function once and records its JSON result; when the job runs again (a retry, a rescue after a
killed worker, an interruption), a completed step returns its recorded result without running.

How a step is exactly once for the jobs' database: an atomic step (``step``'s default) calls its
function inside ``transaction.atomic`` on the job's database and inserts its ``JobStep`` row in
the same transaction. The row is unique on (job, name), so of two runs of one step (a worker
whose lease was lost and the run that took the job over) one commits and the other's insert
fails: its transaction, the function's writes with it, rolls back, and the step returns the
result the first one recorded. Nothing trusts the lease. A step that is not atomic (external
effects: an HTTP call) is recorded after its function returns: at least once, as any work
outside the database; give such work an idempotency key (``step_key``).

Reads: the current run's recorded steps in one query at its first step, none before: a job that
takes no step makes no query. The rows are reached through the job (``Job.recorded_steps``,
``record_step``), so this duty never imports the models.
"""

import contextlib
import inspect
import time

from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction
from django.utils import timezone

from ..context import _current_steps, current_job
from ..enqueue import validation
from ..exceptions import StepError

__all__ = ["astep", "step", "step_key"]

#: The longest step name (the column's length).
MAX_NAME_LENGTH = 200


class _Steps:
    """The steps of one run of one job: what was recorded before it, and the names it took."""

    __slots__ = ("job", "recorded", "taken")

    def __init__(self, job, recorded: dict):
        self.job = job
        self.recorded = recorded
        self.taken = set()


class _RecordedMeanwhile(Exception):  # noqa: N818 - control flow inside this module
    """Another run recorded this step first: roll back this run's atomic step."""


def step(name: str, function, /, *args, atomic: bool = True, **kwargs):
    """Run ``function(*args, **kwargs)`` as the current job's step ``name`` and return its
    result, or, if this job completed that step in an earlier run, return the recorded result
    without calling it. A name is taken once per run, but for a step that raised (not recorded:
    the job may try it again).

    ``atomic=True`` (the default): the function runs in ``transaction.atomic`` on the jobs'
    database, and the step is recorded in that transaction: its writes there happen exactly
    once. ``atomic=False``: recorded after the function returns (at least once); for work that
    should not hold a transaction open (a slow HTTP call). The result must be JSON; a step that
    raises is not recorded and runs again with the job.
    """
    steps, job = _steps(name, step)
    if steps is None:
        steps = _load(job, name, job.recorded_steps())
    if name in steps.recorded:
        return steps.recorded[name]
    with _released_if_raises(steps, name):
        started_at, started = timezone.now(), time.monotonic()
        if not atomic:
            return _record(job, name, function(*args, **kwargs), started_at, started)
        try:
            with transaction.atomic(using=job._state.db):
                value = function(*args, **kwargs)
                _check(name, value)
                try:
                    job.record_step(name, value, **_times(started_at, started))
                except IntegrityError as error:
                    raise _RecordedMeanwhile from error
        except _RecordedMeanwhile:
            return job.recorded_step(name)
        return value


async def astep(name: str, function, /, *args, atomic: bool = False, **kwargs):
    """``step`` in an async job: an async ``function`` is awaited, a sync one runs on the
    thread of the job's ORM calls (``sync_to_async``). Not atomic by default: a transaction
    cannot span awaits, so ``atomic=True`` takes a sync function, run with its recording in
    one transaction on that thread."""
    steps, job = _steps(name, astep)
    is_async = inspect.iscoroutinefunction(function)
    if atomic and is_async:
        raise StepError(
            f"astep({name!r}, atomic=True) was given an async function: Django's transactions "
            "do not span awaits. Pass a sync function (it runs with its recording in one "
            "transaction), or atomic=False.")
    if steps is None:
        steps = _load(job, name, await sync_to_async(job.recorded_steps)())
    if name in steps.recorded:
        return steps.recorded[name]
    with _released_if_raises(steps, name):
        if atomic:
            return await sync_to_async(_atomic_off_loop)(job, name, function, args, kwargs)
        started_at, started = timezone.now(), time.monotonic()
        value = await function(*args, **kwargs) if is_async else (
            await sync_to_async(function)(*args, **kwargs))
        return await sync_to_async(_record)(job, name, value, started_at, started)


def step_key(name: str) -> str:
    """An idempotency key for the current job's step ``name``, the same in every run of the
    job ("sqlqueue-job-42-step-charge"): give it to an external service so that a step that is
    not atomic, run twice after a kill, takes effect once there."""
    job = current_job()
    if job is None:
        raise StepError(f"step_key({name!r}) was called outside a job.")
    return f"sqlqueue-job-{job.pk}-step-{name}"


def _atomic_off_loop(job, name, function, args, kwargs):
    """An atomic step of an async job, on the ORM thread: ``step``, its name taken already by
    ``astep`` (the run's steps are the same object on this thread: the context is copied)."""
    _current_steps.get().taken.discard(name)
    return step(name, function, *args, atomic=True, **kwargs)


@contextlib.contextmanager
def _released_if_raises(steps, name):
    """A step that raised was not recorded: the run may take its name again (a loop of tries)."""
    try:
        yield
    except BaseException:
        steps.taken.discard(name)
        raise


def _steps(name, api):
    """The current run's steps (None before its first) and job, after checking the call."""
    job = current_job()
    if job is None:
        raise StepError(
            f"{api.__name__}({name!r}) was called outside a job: a step is recorded on the job "
            "that runs it. Call the function directly, or run this code as a job.")
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH:
        raise StepError(f"A step's name must be a non-empty string of at most "
                        f"{MAX_NAME_LENGTH} characters, not {name!r}.")
    steps = _current_steps.get()
    if steps is not None and steps.job is not job:
        steps = None  # code that set the job by hand, outside the runner
    if steps is not None:
        if name in steps.taken:
            raise StepError(
                f"The step {name!r} was already taken in this run of job {job.pk}: each step "
                "of a job needs its own name (add the item's id to a step in a loop: "
                "f\"charge-{item.id}\").")
        steps.taken.add(name)
    return steps, job


def _load(job, name, recorded: dict) -> _Steps:
    """The run's steps, at its first step (whose name ``_steps`` could not take yet)."""
    steps = _Steps(job, recorded)
    steps.taken.add(name)
    _current_steps.set(steps)
    return steps


def _record(job, name, value, started_at, started):
    """Record a step that is not atomic, after its function returned; the recorded result if
    another run recorded it first."""
    _check(name, value)
    try:
        # A savepoint inside a caller's transaction: a unique violation must not break it.
        with transaction.atomic(using=job._state.db):
            job.record_step(name, value, **_times(started_at, started))
    except IntegrityError:
        return job.recorded_step(name)
    return value


def _check(name, value) -> None:
    validation.check_json(value, f"the result of step {name!r}")


def _times(started_at, started) -> dict:
    duration = time.monotonic() - started
    return {"started_at": started_at, "finished_at": timezone.now(),
            "duration_seconds": duration}
