"""The pieces of SQL text the statements of every database share, written once."""

import datetime as dt

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




def outcome_row(pk, token, status, result, errors, run_at, finished_at, give_back, interrupted,
                *, time_text=dt.datetime.isoformat) -> dict:
    """One row of record_outcomes' JSON document; keys left out are NULL (most outcomes are
    successes, which set few columns). ``time_text``: a time as the document writes it."""
    row = {"id": pk, "token": str(token), "status": status}
    if result is not None:
        row["result"] = result
    if errors is not None:
        row["errors"] = errors
    if run_at is not None:
        row["run_at"] = time_text(run_at)
    if finished_at is not None:
        row["finished_at"] = time_text(finished_at)
    if give_back:
        row["give_back"] = 1
    if interrupted:
        row["interrupted"] = 1
    return row
