"""Running a transactional job (docs/transactional-jobs.md): its function and its outcome in one
transaction, so that its own writes to the jobs' database and its completion commit together, or
neither does.

Two ways lead here. A worker's transactional lane (``worker/transactional_lane.py``) locks ready
transactional rows without writing them and runs each through :func:`attempt` inside a savepoint
of the lane's transaction. A transactional job taken by the ordinary claim (a worker without the
lane, ``Job.objects.claim()`` by hand) is already running under a claim token: :func:`run_claimed`
runs it inside a transaction of its own that ends with its fenced outcome write, and rolls its
effects back when the fence finds the claim lost. Either way a failure's effects are undone, and
the failure is written as any job's (its retry policy, its errors).
"""

import time

from django.db import connections, transaction

from ..db import outages
from .outcomes import transition, write
from .runner import Outcome, OutcomeKind, run


class _Undo(Exception):  # noqa: N818 - control flow: leave the atomic block, rolling it back
    """Raised inside an atomic block to roll back what the attempt wrote."""


def attempt(job, alias: str) -> Outcome:
    """Run ``job`` inside a savepoint (or a transaction) on ``alias``; keep what it wrote only
    when it succeeded. A job that raised, or whose result cannot be stored, has its writes
    rolled back; so has one whose savepoint could not be released (a statement of its own
    failed and it caught the error: PostgreSQL refuses the rest of the transaction)."""
    outcome = None
    try:
        with transaction.atomic(using=alias):
            outcome = run(job)
            if outcome.kind != OutcomeKind.SUCCEEDED:
                raise _Undo
    except _Undo:
        pass
    except Exception as exc:  # the savepoint's release failed: the attempt's own doing...
        if outcome is None or not connections[alias].is_usable():
            raise  # ...unless the connection is gone (the transaction ended under the job)
        outcome = Outcome(OutcomeKind.FAILED, error=exc,
                          duration_seconds=outcome.duration_seconds)
    return outcome


def run_claimed(job, alias: str) -> tuple[Outcome, bool]:
    """Run a transactional job claimed by the ordinary claim. A success is written here, fenced,
    in the job's own transaction: ``(outcome, True)`` once committed with its effects, or, when
    the claim was lost meanwhile (the job timed out, was rescued or released), rolled back
    with them: ``(outcome, False)``, nothing written, the effects undone. Any other outcome
    rolled back its effects and is ``(outcome, None)``: for the outcome writer to write.

    The database going away under the transaction after the job returned (at the outcome's
    write, its commit, the rollback) is an interruption, as it is inside the job: the effects
    went with the transaction, and the outcome writer records it, fenced, once the database
    answers (a commit that took effect before the connection broke left the job succeeded, and
    the fence then finds it no longer running: nothing more is written). Counted towards its
    max_interruptions as inside the job: only if the server stayed up and answers (its own
    connection died), not after an outage (``outages.server_stayed_up``)."""
    written, outcome = None, None
    began = time.monotonic()
    try:
        with transaction.atomic(using=alias):
            outcome = attempt(job, alias)
            if outcome.kind != OutcomeKind.SUCCEEDED:
                raise _Undo
            written = job.pk in write(
                [(job, transition(job, outcome, result_checked=True))], alias)
            if not written:
                raise _Undo
    except _Undo:
        pass
    except Exception as exc:
        if not outages.database_went_away(exc, alias):
            raise
        # (Without this, the exception ended the job's run in the pool's last resort: the job
        # waited for its lease to run out, and was rescued as lost with its worker.) Counted
        # only if the server stayed up, as the job's own error is (runner._raised); counted
        # always, a restart charged every run it cut short here one of its max_interruptions.
        return Outcome(OutcomeKind.INTERRUPTED, error=exc,
                       counted=outages.server_stayed_up(alias, began),
                       duration_seconds=outcome.duration_seconds if outcome else 0.0), None
    return outcome, written
