"""Run one claimed job by hand and record it: ``run_job(job)``, and the line the worker logs for
every finished attempt (``report``, on this module's logger).

The parts are the runner (``runner.run``: call the function, classify the outcome) and the
outcome write (``outcomes``); kept apart so that a worker can retry a write through a database
outage without running the job again. ``call_task`` and ``apply_outcome`` are those two steps
under their documented names.
"""

import logging
from dataclasses import dataclass

from . import outcomes
from .runner import Outcome, OutcomeKind, run

__all__ = ["Outcome", "OutcomeKind", "RunResult", "apply_outcome", "call_task", "report",
           "run_job"]

# The logger keeps the name it had before the module moved (docs/api.md, docs/operations.md).
logger = logging.getLogger("django_sqlqueue.execution")

#: Call the job's registered function (``runner.run``). Touches no database.
call_task = run


@dataclass
class RunResult:
    job: object
    # succeeded, failed, exhausted, cancelled, rescheduled, interrupted (its database went away:
    # runs again) or lost (its lease)
    outcome: str
    duration_seconds: float


def apply_outcome(job, outcome: Outcome) -> bool:
    """Write the outcome (fenced). False if the job is no longer this claim's."""
    return outcomes.write_one(job, outcomes.transition(job, outcome))


def run_job(job) -> RunResult:
    """Run a job returned by ``Job.objects.claim`` and write its outcome."""
    outcome = run(job)
    return report(job, outcome, apply_outcome(job, outcome))


#: The longest error message on a ``job finished`` line; the job's row keeps it whole.
MAX_MESSAGE_CHARS = 500


def error_message(error: BaseException | None) -> str | None:
    """The exception's message on one line, shortened past ``MAX_MESSAGE_CHARS``."""
    if error is None:
        return None
    text = " ".join(str(error).split())
    return text[:MAX_MESSAGE_CHARS - 3] + "..." if len(text) > MAX_MESSAGE_CHARS else text


def report(job, outcome: Outcome, applied: bool) -> RunResult:
    """Log one key=value line for the outcome and return it as a RunResult."""
    if not applied:
        kind = "lost"
    elif outcome.kind == OutcomeKind.RESCHEDULED:
        kind = "rescheduled"
    elif outcome.kind == OutcomeKind.INTERRUPTED and job.status == "queued":
        kind = "interrupted"  # runs again, the attempt not counted
    else:
        kind = job.status
    log = logger.warning if kind in ("failed", "exhausted", "lost", "interrupted") else logger.info
    error = outcome.error
    error_type = type(error).__name__ if error is not None else None
    message = error_message(error)
    duration_ms = round(outcome.duration_seconds * 1000, 1)
    # The traceback of a job's last failure, and of every failure at runworker -v 2 (DEBUG).
    traceback_shown = (error is not None and error.__traceback__ is not None
                       and (kind == "exhausted" or logger.isEnabledFor(logging.DEBUG)))
    log(
        "job finished task=%s id=%s attempt=%s outcome=%s duration_ms=%.1f%s",
        job.task_name, job.pk, job.attempts, kind, duration_ms,
        "" if error_type is None else f" error={error_type}: {message}" if message
        else f" error={error_type}",
        exc_info=(type(error), error, error.__traceback__) if traceback_shown else None,
        # The keys of this line in runworker --log-format keyvalue/json (worker/log_format.py).
        extra={"sqlqueue": {"event": "job.finished", "task": job.task_name, "job_id": job.pk,
                            "queue": job.queue, "attempt": job.attempts, "outcome": kind,
                            "duration_ms": duration_ms, "error": error_type,
                            "error_message": message}},
    )
    return RunResult(job=job, outcome=kind, duration_seconds=outcome.duration_seconds)
