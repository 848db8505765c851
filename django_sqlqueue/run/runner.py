"""The one runner: call a claimed job's function and say what came of it, for every API.

``run(job)`` finds the job's adapter by its task name, calls the function, classifies what
happened as an :class:`Outcome` (succeeded, failed, aborted, rescheduled), checks it (a bad
``Reschedule``, a result that is not JSON), and has the adapter send its API's signals, once per
attempt. It writes nothing to the database but the job's last unreported progress
(progress.py), before the outcome (after a database error it may check that the database still
answers: outages.py); writing the outcome is the outcome writer's job
(``outcomes.py`` says what each outcome writes, ``worker/outcome_writer.py`` writes them).

An adapter is how one API's jobs are found and called. ``@job`` functions are built in
(``registry``; they send ``signals.job_started`` / ``job_finished``); the ``django.tasks``
backend plugs its own in with :func:`register_adapter` when it is imported, so this module
never imports the backend.
"""

import enum
import logging
import time
from dataclasses import dataclass

from asgiref.sync import async_to_sync, sync_to_async
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from .. import signals
from ..context import _current_job, _current_steps
from ..db import outages
from ..enqueue import validation
from ..enqueue.registered import get_task
from ..exceptions import Abort, InvalidJob, Reschedule, UnknownTask
from ..telemetry import tracing
from . import unknown
from .cancellation import cancellable, cancelled_error, stop_requested
from .parent_results import with_parent_results
from .progress import board as progress_board
from .progress import write_final as write_final_progress

# The logger has the name of the module's documented path, as the other moved modules' keep.
logger = logging.getLogger("django_sqlqueue.runner")


class OutcomeKind(str, enum.Enum):
    """What an attempt came to (a ``str``, so ``outcome.kind == "succeeded"`` holds)."""

    SUCCEEDED = "succeeded"  # returned a JSON result
    FAILED = "failed"  # raised: runs again by its retry policy while attempts are left
    ABORTED = "aborted"  # can never succeed (Abort, a bad row, a result that is not JSON)
    RESCHEDULED = "rescheduled"  # raised Reschedule: runs again later, not counted as a failure
    CANCELLED = "cancelled"  # the job was cancelled while it ran: it never runs again
    # Cut short by the infrastructure (its database went away under it): runs again without
    # using an attempt, up to the job's max_interruptions (outcomes.interruption).
    INTERRUPTED = "interrupted"

    def __str__(self):
        return self.value


@dataclass
class Outcome:
    """An attempt's outcome, before it is written."""

    kind: OutcomeKind  # or its string value
    result: object = None
    error: BaseException | None = None
    run_at: object = None  # of a reschedule
    delay: float | None = None  # of a reschedule, or before the retry (None: the job's policy)
    duration_seconds: float = 0.0
    # Of an interruption: held against max_interruptions. Not when the database could not be
    # reached: an outage is not the job's doing (outcomes.interruption).
    counted: bool = True


class Attempt:
    """One attempt of one job, as an adapter runs it. The adapter for ``@job`` functions is the
    base class; the ``django.tasks`` backend subclasses it."""

    #: Whether ``started``/``finished`` do anything: the base class sends no signals, and a
    #: worker runs thousands of attempts a second, so the runner skips the calls then.
    sends_signals = False
    __slots__ = ("job", "function", "args", "kwargs", "is_async")

    def __init__(self, job, function, args, kwargs, *, is_async=False):
        self.job = job
        self.function = function  # called with (*args, **kwargs)
        self.args = args
        self.kwargs = kwargs
        self.is_async = is_async  # a coroutine function, awaited on this thread

    def call(self):
        if self.is_async:
            # async_to_sync, not asyncio.run: the async ORM's sync_to_async calls then run on
            # this thread, whose connection the worker checks and replaces when it breaks.
            # Wrapped so that a cancel of the job cancels the task awaiting the function.
            return async_to_sync(cancellable(self.job, self.function))(*self.args, **self.kwargs)
        return self.function(*self.args, **self.kwargs)

    def started(self) -> None:
        """The function is about to be called (signals)."""

    def result(self, value):
        """``value`` as stored, or raise (InvalidJob, TypeError, ValueError) if it cannot be."""
        validation.check_json(value, "the result")
        return value

    def retry_delay(self, error) -> float | None | bool:
        """Seconds before the retry after ``error``; None: the job's backoff policy; False: do
        not retry."""
        return None

    def finished(self, outcome: Outcome, will_retry: bool) -> None:
        """The attempt is over (signals). For a failure, called inside the ``except`` block."""


class JobAttempt(Attempt):
    """An attempt of a ``@job`` function that has ``job_started`` / ``job_finished`` receivers
    (without any, the plain ``Attempt`` is used: nothing to send)."""

    sends_signals = True
    __slots__ = ()

    def started(self):
        signals.send(signals.job_started, type(self.job), job=self.job)

    def finished(self, outcome, will_retry):
        signals.send(signals.job_finished, type(self.job), job=self.job, outcome=outcome.kind,
                     exception=outcome.error, will_retry=will_retry, result=outcome.result)


_adapters: dict = {}  # task-name prefix -> callable(job) -> Attempt


def register_adapter(prefix: str, load) -> None:
    """Run jobs whose task name starts with ``prefix`` through ``load(job) -> Attempt``, which
    raises UnknownTask (given back: a newer worker may know it; run/unknown.py) or InvalidJob
    (never runnable)."""
    _adapters[prefix] = load


def _load_registered_job(job) -> Attempt:
    """The adapter of ``@job`` functions: only names registered in this process run."""
    task = get_task(job.task_name)
    args, kwargs = arguments(job)
    function = task.func
    given = job.payload.get("parent_results")  # a workflow's step (workflows/canvas.py)
    if given is not None:
        function = with_parent_results(job, function, given, is_async=task.is_async)
    sender = type(job)
    signalled = (signals.has_receivers(signals.job_started, sender)
                 or signals.has_receivers(signals.job_finished, sender))
    return (JobAttempt if signalled else Attempt)(job, function, args, kwargs,
                                                  is_async=task.is_async)


def runs_on_loop(job) -> bool:
    """Whether ``job`` is an async job, to run on the worker's event loop (``arun``). A job
    that cannot be loaded is not: ``run`` on a thread records why, as it always did (this runs
    on the claiming thread, which an adapter's error must not stop)."""
    try:
        for prefix in _adapters:
            if job.task_name.startswith(prefix):
                return _load(job).is_async
        return get_task(job.task_name).is_async
    except Exception:  # noqa: BLE001 - see above
        return False

def _load(job) -> Attempt:
    for prefix, load in _adapters.items():
        if job.task_name.startswith(prefix):
            return load(job)
    return _load_registered_job(job)


def run(job) -> Outcome:
    """Run a claimed job's function once and return the outcome (no database writes)."""
    started = time.monotonic()
    span = tracing.run_span(job)  # OpenTelemetry's, if set up
    if span is tracing.OFF:  # not even a no-op context: this runs thousands of times a second
        outcome = _run(job)
    else:
        with span as current:
            outcome = _run(job)
            tracing.ran(current, outcome)
    outcome.duration_seconds = time.monotonic() - started
    return outcome


def _run(job) -> Outcome:
    attempt = _begin(job)
    if isinstance(attempt, Outcome):
        return attempt
    if stop_requested(job):  # cancelled while it waited for a thread: do not start it
        return _over(attempt, Outcome(OutcomeKind.CANCELLED))
    if attempt.sends_signals:
        _tell(attempt.started, attempt.job, "started")
    token, steps = _current_job.set(job), _current_steps.set(None)  # steps: read at the first
    began = time.monotonic()
    try:
        value = attempt.call()
    # Whatever the job raised is its own failure, BaseExceptions included: sys.exit(),
    # KeyboardInterrupt or GeneratorExit in a job fail the job, never the worker's thread;
    # CancelledError is how an async job's task stops when the job is cancelled. Unless the
    # database went away under it: then the run was interrupted, not failed (outages.py).
    except BaseException as exc:  # noqa: BLE001 - see above
        return _over(attempt, _raised(attempt, exc, began))  # in the except block: signals see it
    finally:
        _current_steps.reset(steps)
        _current_job.reset(token)
        write_final_progress(job)
    return _over(attempt, _returned(attempt, value))


async def arun(job) -> Outcome:
    """``run`` for an async job on the worker's event loop: the function is awaited in the
    calling task, and what may touch the database (signal receivers; the outage check after an
    error) runs on the thread of ``sync_to_async(thread_sensitive=True)``, as the job's own ORM
    calls do: no synchronous database call is made on the loop."""
    started = time.monotonic()
    span = tracing.run_span(job)
    if span is tracing.OFF:
        outcome = await _arun(job)
    else:
        with span as current:
            outcome = await _arun(job)
            tracing.ran(current, outcome)
    outcome.duration_seconds = time.monotonic() - started
    return outcome


async def _arun(job) -> Outcome:
    attempt = _begin(job)
    if isinstance(attempt, Outcome):
        return attempt
    if stop_requested(job):
        return await _off_loop(_over)(attempt, Outcome(OutcomeKind.CANCELLED))
    if attempt.sends_signals:
        await _off_loop(_tell)(attempt.started, attempt.job, "started")
    # This task's own context: each job sees its own job and steps.
    token, steps = _current_job.set(job), _current_steps.set(None)
    began = time.monotonic()
    try:
        value = await cancellable(job, attempt.function)(*attempt.args, **attempt.kwargs)
    except BaseException as exc:  # noqa: BLE001 - as in _run
        return await _off_loop(_raised_and_over)(attempt, exc, began)
    finally:
        _current_steps.reset(steps)
        _current_job.reset(token)
        if progress_board.has_pending(job):  # no thread hop for a job that never reported
            await _off_loop(write_final_progress)(job)
    outcome = _returned(attempt, value)
    if attempt.sends_signals or stop_requested(job):
        return await _off_loop(_over)(attempt, outcome)
    return outcome


def _off_loop(function):
    return sync_to_async(function, thread_sensitive=True)


def _raised_and_over(attempt: Attempt, error: BaseException, began: float) -> Outcome:
    """``_over(attempt, _raised(...))`` inside an except block of ``error`` (on the thread of
    the async job's sync calls), so that receivers see it in ``sys.exc_info()``."""
    try:
        raise error
    except BaseException:  # noqa: BLE001 - it is the job's own error, re-raised to be handled
        return _over(attempt, _raised(attempt, error, began))


def _begin(job):
    """The job's Attempt, or the Outcome of a job that cannot be loaded."""
    try:
        attempt = _load(job)
    except UnknownTask as exc:
        # Maybe a worker with newer code can run it: given back, not failed (unknown.py).
        given_back = unknown.verdict(job, exc)
        if isinstance(given_back, UnknownTask):
            return Outcome(OutcomeKind.ABORTED, error=given_back)
        return Outcome(OutcomeKind.RESCHEDULED, delay=given_back, error=exc)
    except InvalidJob as exc:
        return Outcome(OutcomeKind.ABORTED, error=exc)  # a malformed row will not mend itself
    return attempt


def _raised(attempt: Attempt, error: BaseException, began: float) -> Outcome:
    """What an attempt called at ``began`` (monotonic) that raised ``error`` came to."""
    if isinstance(error, Reschedule):
        try:
            validation.run_at(error.run_at, error.delay, timezone.now())
        except InvalidJob as exc:  # a bad delay fails the attempt, not the outcome write
            return _failure(attempt, exc)
        return Outcome(OutcomeKind.RESCHEDULED, run_at=error.run_at, delay=error.delay)
    if isinstance(error, Abort):
        return Outcome(OutcomeKind.ABORTED, error=error)
    alias = attempt.job._state.db or DEFAULT_DB_ALIAS
    if outages.database_went_away(error, alias):
        # Counted only if the job lost its own connection while the server stayed up (a job
        # could repeat that for ever); an outage is not the job's doing.
        return Outcome(OutcomeKind.INTERRUPTED, error=error,
                       counted=outages.server_stayed_up(alias, began))
    return _failure(attempt, error)


def _returned(attempt: Attempt, value) -> Outcome:
    try:
        value = attempt.result(value)
    except (InvalidJob, TypeError, ValueError) as exc:
        # The function ran to the end, side effects and all: running it again would repeat
        # them, so the job ends exhausted with the reason instead of being retried.
        return Outcome(OutcomeKind.ABORTED, error=exc)
    return Outcome(OutcomeKind.SUCCEEDED, result=value)


def _failure(attempt: Attempt, error: BaseException) -> Outcome:
    """A failure: ask the adapter about the retry."""
    if stop_requested(attempt.job):
        return Outcome(OutcomeKind.FAILED, error=error)  # becomes cancelled
    delay = attempt.retry_delay(error)
    if delay is False:
        return Outcome(OutcomeKind.ABORTED, error=error)
    return Outcome(OutcomeKind.FAILED, error=error, delay=delay)


def _over(attempt: Attempt, outcome: Outcome) -> Outcome:
    if stop_requested(attempt.job):
        # Asked to stop while it ran: whatever the attempt came to (it returned after seeing
        # the flag, raised, or its task was cancelled), the job is cancelled.
        outcome = Outcome(OutcomeKind.CANCELLED, error=cancelled_error(attempt.job))
    if attempt.sends_signals:
        _tell(attempt.finished, attempt.job, "finished", outcome,
              will_retry(attempt.job, outcome))
    return outcome


def _tell(method, job, what: str, *args) -> None:
    """Have the adapter send its started or finished signals. A receiver that raises (a bug, or
    its own write while the database is away) is logged and changes nothing: the attempt's
    outcome stands, and is written. Let through, it would leave the job held by no thread
    until its lease ran out."""
    try:
        method(*args)
    except Exception:
        logger.exception("a receiver of the %s signal failed for job id=%s; its outcome "
                         "stands", what, job.pk)


def will_retry(job, outcome: Outcome) -> bool:
    """Whether the job runs again after this outcome (the outcome writer decides the same)."""
    if outcome.kind == OutcomeKind.RESCHEDULED:
        return True
    if outcome.kind == OutcomeKind.INTERRUPTED:
        return not outcome.counted or job.interruptions + 1 < job.max_interruptions
    return outcome.kind == OutcomeKind.FAILED and job.attempts < job.max_attempts


def arguments(job) -> tuple:
    """``(args, kwargs)`` of a job's payload, or InvalidJob if the row is malformed."""
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

