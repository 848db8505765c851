"""The pieces of SQL text the statements of every database share, written once."""

import datetime as dt
from typing import NamedTuple

from django.db.models import CharField
from django.db.models.expressions import RawSQL

from ..statuses import READY_STATUSES, JobStatus

#: What ``document_value`` answers for a field whose per-job values the insert's JSON document
#: cannot carry on this database: the batch goes through ``bulk_create`` instead.
NOT_PLAIN = object()

#: How ``claim_jobs`` sets a column: from a parameter, to the database's "now", or to "now"
#: plus the seconds of a parameter.
PARAM, NOW, NOW_PLUS = "param", "now", "now plus"

#: The ready statuses as SQL text: in the text, not a parameter, so that the partial ready
#: indexes match it even with server-side binding.
READY_LIST = ", ".join(f"'{status}'" for status in READY_STATUSES)

#: The running status as a fence of a statement that finds its jobs by id (the outcome write, a
#: heartbeat): a value the planner sees only when the statement runs, not the constant. With the
#: constant, PostgreSQL may read "the running jobs" from their partial index
#: (sqlqueue_job_leases), which its statistics make look small: they count the jobs running
#: now, not the index's entries of every job that ran since the last vacuum, which a bitmap
#: scan never marks dead. Under a sustained load of 12,000 jobs/s that index held 140,000
#: entries, and an outcome write of 128 jobs read 9,500 heap pages through it (12.8 ms a write
#: against 0.8 ms by primary key; benchmarks/sustained_cpu.py). The same text on SQLite; MariaDB,
#: which has no partial index, keeps the constant in its own outcome write.
RUNNING_BY_ID = f"(SELECT '{JobStatus.RUNNING.value}')"


def running_by_id() -> RawSQL:
    """``RUNNING_BY_ID`` as the value of an ORM filter on ``status``."""
    return RawSQL(RUNNING_BY_ID, (), output_field=CharField())


#: The keys of an entry of a job's ``errors``, in order (``outcomes.error_entry`` builds it in
#: Python; a rescue in SQL, with ``DatabaseDriver.error_entry``).
ERROR_ENTRY_KEYS = ("attempt", "at", "type", "message", "traceback", "worker", "interrupted")


def cancel_wins(cancel_requested_at: str, status: str) -> str:
    """The status a fenced write gives a job: ``status`` (SQL text), unless the job's cancel was
    asked for (``cancel_requested_at``, its column as the statement names it): then
    ``cancelled``, whatever the outcome, so that a success, failure or release that raced the
    request can neither overwrite it nor let the job run again."""
    return (f"CASE WHEN {cancel_requested_at} IS NULL THEN {status} "
            f"ELSE '{JobStatus.CANCELLED.value}' END")


def runs_again(prefix: str, col: dict) -> str:
    """Whether an interrupted job runs again: its interruptions, this one included, are fewer
    than its max_interruptions (every column read as before the UPDATE)."""
    return f"{prefix}{col['interruptions']} + 1 < {prefix}{col['max_interruptions']}"




class OutcomeRow(NamedTuple):  # a tuple: one is made per finished job, on the hot path
    """One outcome ``record_outcomes`` writes: which claim (the running job's id and claim
    token) and what to write, as Python values (``run/outcomes.Transition``'s)."""

    id: int
    token: object  # the claim token (a UUID) the write is fenced on
    status: str
    result: object = None  # JSON; None is stored as SQL NULL, as the ORM stores it
    errors: list | None = None  # None: leave the column as it is
    run_at: dt.datetime | None = None  # None: leave the column as it is
    finished_at: dt.datetime | None = None
    give_back: bool = False  # max_attempts goes up by one: the attempt is not counted
    interrupted: bool = False  # interruptions goes up by one

    @property
    def succeeded(self) -> bool:
        return self.status == JobStatus.SUCCEEDED.value


def outcome_row(row: OutcomeRow, *, time_text=dt.datetime.isoformat) -> dict:
    """One row of record_outcomes' JSON document; keys left out are NULL (most outcomes are
    successes, which set few columns). ``time_text``: a time as the document writes it."""
    document = {"id": row.id, "token": str(row.token), "status": row.status}
    if row.result is not None:
        document["result"] = row.result
    if row.errors is not None:
        document["errors"] = row.errors
    if row.run_at is not None:
        document["run_at"] = time_text(row.run_at)
    if row.finished_at is not None:
        document["finished_at"] = time_text(row.finished_at)
    if row.give_back:
        document["give_back"] = 1
    if row.interrupted:
        document["interrupted"] = 1
    return document
