"""Job statuses (the state machine is drawn in docs/concepts.md), and the other named values
the tables hold."""

from django.db import models


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"  # waiting for its run_at; new, released or rescheduled
    RUNNING = "running", "Running"  # claimed by a worker holding a lease
    SUCCEEDED = "succeeded", "Succeeded"  # final
    FAILED = "failed", "Failed, will retry"  # an attempt failed; runs again at run_at
    EXHAUSTED = "exhausted", "Exhausted"  # final: failed with no attempts left, or aborted
    CANCELLED = "cancelled", "Cancelled"  # final: cancelled before it ran
    EXPIRED = "expired", "Expired"  # final: not started before expires_at
    # In a workflow, until every parent has succeeded (docs/workflows.md): not ready, so not in
    # the ready indexes at all; the outcome write of its last parent queues it.
    WAITING = "waiting", "Waiting for its parents"


READY_STATUSES = (JobStatus.QUEUED, JobStatus.FAILED)
#: The statuses in which a job holds its unique key (the partial unique index of migration 0001,
#: MariaDB's generated column of 0012). A workflow's jobs have no unique key.
KEY_HOLDING_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.FAILED)
UNFINISHED_STATUSES = (*KEY_HOLDING_STATUSES, JobStatus.WAITING)
FINISHED_STATUSES = (
    JobStatus.SUCCEEDED, JobStatus.EXHAUSTED, JobStatus.CANCELLED, JobStatus.EXPIRED,
)
RETRYABLE_STATUSES = (  # what "retry now" may queue again
    JobStatus.FAILED, JobStatus.EXHAUSTED, JobStatus.CANCELLED, JobStatus.EXPIRED,
)

#: The end of an interruption's message in ``Job.errors``, by whether the job runs again: the
#: rescue's SQL (db/writes.py, db/mariadb/statements.py) and outcomes.interruption write the
#: same words.
INTERRUPTION_RUNS_AGAIN = ": the job runs again, the attempt not counted."
INTERRUPTION_FINAL = (": not run again (max_interruptions), as the job may be what stops its "
                      "workers.")

#: A schedule's missed-tick policies (``Schedule.missed``), what ticks/tick_plan.py does
#: with the ticks found late.
LATEST, SKIP, CATCH_UP = "latest", "skip", "catch_up"
MISSED_POLICIES = (LATEST, SKIP, CATCH_UP)
