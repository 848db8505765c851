"""MariaDB's SQL text: what the drivers' statements (``base.py``, ``writes.py``) become on a
database without partial indexes and without ``UPDATE ... RETURNING`` (docs/databases.md).
``driver.py``, the MariaDB driver, calls these; so do migration 0012 (its generated columns) and
the ORM's reads of ready rows (``READY_CONDITION``).

Values always travel as query parameters; only column and table names (quoted by the backend),
the status constants of statuses.py and ``%s`` placeholders are put into the SQL text.

**No partial indexes**: migration 0012 adds two persistent generated columns, ``is_ready`` (1
while the job waits to be claimed, else NULL) and ``unfinished_unique_key`` (the unique key
while the job is unfinished, else NULL), and puts the ready indexes behind ``is_ready`` and the
unique index on ``unfinished_unique_key`` (NULLs never collide). A claim names ``is_ready = 1``
so that the index is used: MariaDB does not substitute the generated column's expression.

**No UPDATE ... RETURNING**: a statement that updates rows and returns some of their columns is
a ``Stepped`` statement: in one transaction, a locking SELECT of the rows' ids, the UPDATE of
those ids, and a SELECT of the columns; ``returning.fetch`` runs it.
"""

from collections.abc import Callable
from typing import NamedTuple

from django.conf import settings

from ...statuses import (
    INTERRUPTION_FINAL,
    INTERRUPTION_RUNS_AGAIN,
    KEY_HOLDING_STATUSES,
    READY_STATUSES,
    JobStatus,
)
from ..job_table import UNIQUE_STATE_BITS
from ..pieces import cancel_wins, runs_again

#: The generated columns of migration 0012, not fields of the model.
READY_COLUMN = "is_ready"
#: The ready rows' condition that MariaDB's ready indexes can serve (they lead with READY_COLUMN;
#: its optimizer does not derive it from ``status IN (...)``): for ORM reads of ready rows.
READY_CONDITION = f"`{READY_COLUMN}` = 1"
UNFINISHED_KEY_COLUMN = "unfinished_unique_key"
#: Migration 0015's generated column: a job's unique slot while it holds it (its status is one of
#: its unique_states, job_table.SLOT_HELD), else NULL; its unique index stands in for the
#: partial unique index of other databases, and finds a slot's holder.
HELD_SLOT_COLUMN = "held_unique_slot"
HELD_SLOT_CONDITION = f"`{HELD_SLOT_COLUMN}` = %s"


def _ids(count: int) -> str:
    return ", ".join(["%s"] * count)


# ---- the database's clock ---------------------------------------------------------------------

def now_sql(plus_seconds: bool = False) -> str:
    """SQL text for "now" (the drivers' ``now_sql``): the start of the statement, to the
    microsecond, in UTC as Django stores it with USE_TZ (local time without it);
    ``plus_seconds``: plus the seconds of the next parameter. Constant within a statement: every
    row of one claim gets the same."""
    clock = "UTC_TIMESTAMP(6)" if settings.USE_TZ else "NOW(6)"
    if plus_seconds:
        return f"TIMESTAMPADD(MICROSECOND, ROUND(%s * 1000000), {clock})"
    return clock


# ---- the schema of migration 0012 ---------------------------------------------------------

def _index_parts(columns) -> str:
    return ", ".join(f"`{name[1:]}` DESC" if name.startswith("-") else f"`{name}`"
                     for name in columns)


#: The indexes migration 0012 redefines: (name, columns behind ``is_ready``). Django created each
#: as a plain index of the columns (MariaDB ignores an index's condition): of every row, finished
#: ones included, so that a claim walked past every finished job in its order.
READY_INDEXES = (
    ("sqlqueue_job_ready", ("queue", "-priority", "run_at", "id")),
    ("sqlqueue_job_ready_any_queue", ("-priority", "run_at", "id")),
    ("sqlqueue_job_ready_by_key", ("queue", "concurrency_key", "-priority", "run_at", "id")),
    ("sqlqueue_job_expiring", ("expires_at",)),
)


def add_generated_columns() -> str:
    """Migration 0012 forwards: the generated columns and the indexes on them, as one ALTER
    TABLE, which MariaDB applies whole or not at all (its DDL is atomic per statement since
    10.6, though not transactional): a failed run leaves the table as it was and can run again.
    """
    ready = ", ".join(f"'{status}'" for status in READY_STATUSES)
    unfinished = ", ".join(f"'{status}'" for status in KEY_HOLDING_STATUSES)
    parts = [
        f"ADD COLUMN `{READY_COLUMN}` TINYINT AS "
        f"(CASE WHEN `status` IN ({ready}) THEN 1 END) PERSISTENT",
        f"ADD COLUMN `{UNFINISHED_KEY_COLUMN}` VARCHAR(255) AS "
        f"(CASE WHEN `status` IN ({unfinished}) THEN `unique_key` END) PERSISTENT",
    ]
    for name, columns in READY_INDEXES:
        parts += [f"DROP INDEX `{name}`",
                  f"ADD INDEX `{name}` (`{READY_COLUMN}`, {_index_parts(columns)})"]
    parts.append(f"ADD UNIQUE INDEX `sqlqueue_job_unique_key` (`{UNFINISHED_KEY_COLUMN}`)")
    return "ALTER TABLE `django_sqlqueue_job` " + ", ".join(parts)


def drop_generated_columns() -> str:
    """Migration 0012 backwards: the indexes as Django made them, without the columns (one
    ALTER TABLE, like ``add_generated_columns``)."""
    parts = ["DROP INDEX `sqlqueue_job_unique_key`"]
    for name, columns in READY_INDEXES:
        parts += [f"DROP INDEX `{name}`", f"ADD INDEX `{name}` ({_index_parts(columns)})"]
    parts += [f"DROP COLUMN `{UNFINISHED_KEY_COLUMN}`", f"DROP COLUMN `{READY_COLUMN}`"]
    return "ALTER TABLE `django_sqlqueue_job` " + ", ".join(parts)


def add_held_slot_column() -> str:
    """Migration 0015 forwards: the held slot's generated column and its unique index, as one
    ALTER TABLE (whole or not at all, like ``add_generated_columns``). The status's bit is
    ``job_table.UNIQUE_STATE_BITS``, written out here as that module's STATUS_BIT says it."""
    bits = " ".join(f"WHEN '{status}' THEN {bit}" for status, bit in UNIQUE_STATE_BITS.items())
    return (
        "ALTER TABLE `django_sqlqueue_job` "
        f"ADD COLUMN `{HELD_SLOT_COLUMN}` VARCHAR(300) AS (CASE WHEN `unique_states` & "
        f"(CASE `status` {bits} ELSE 0 END) > 0 THEN `unique_slot` END) PERSISTENT, "
        f"ADD UNIQUE INDEX `sqlqueue_job_unique_slot` (`{HELD_SLOT_COLUMN}`)"
    )


def drop_held_slot_column() -> str:
    """Migration 0015 backwards."""
    return ("ALTER TABLE `django_sqlqueue_job` DROP INDEX `sqlqueue_job_unique_slot`, "
            f"DROP COLUMN `{HELD_SLOT_COLUMN}`")


# ---- updates that return columns, in steps --------------------------------------------------

class Stepped(NamedTuple):
    """An update that returns columns, in three statements run in one transaction
    (``returning.fetch``): ``lock`` SELECTs the ids of the rows to update and locks them (``FOR
    UPDATE``, ``SKIP LOCKED`` for a claim), so that no one changes them before the UPDATE;
    ``update(n)`` is the UPDATE of ``n`` ids and ``read(n)`` the SELECT of the returned columns
    of ``n`` ids, each given as the last ``n`` parameters; ``split(params)`` turns the caller's
    parameters, laid out as for the one-statement version of other databases, into (lock's,
    update's)."""

    lock: str
    update: Callable[[int], str]
    read: Callable[[int], str]
    split: Callable[[list], tuple[list, list]]

    def run(self, cursor, params) -> list:
        lock_params, update_params = self.split(list(params))
        cursor.execute(self.lock, lock_params)
        # Updated in id order: two transactions that lock overlapping rows in different
        # orders deadlock (error 1213) on MariaDB, which then rolls one of them back.
        ids = sorted({row[0] for row in cursor.fetchall()})
        if not ids:
            return []
        cursor.execute(self.update(len(ids)), [*update_params, *ids])
        cursor.execute(self.read(len(ids)), ids)
        return cursor.fetchall()


def _in(column: str):
    """``update``/``read`` text ending in ``column IN (%s, ...)`` of ``count`` ids."""
    def text(prefix: str):
        return lambda count: f"{prefix} WHERE {column} IN ({_ids(count)})"
    return text


def claim_jobs(picked_ids_sql, table, pk, sets: list, set_params: int, columns: str,
               claimed_at: str | None) -> Stepped:
    """claim_jobs on MariaDB: lock the rows ``picked_ids_sql`` picks (its ``FOR UPDATE SKIP
    LOCKED`` skips those another claim holds), UPDATE them with ``sets`` (SQL text of the
    assignments, whose first ``set_params`` parameters come first), read back ``columns`` and,
    with ``claimed_at`` (its quoted column), that time as text, last. "Now" is the UPDATE's:
    MariaDB reads the clock once per statement, after the rows were locked."""
    returned = f"{columns}, CAST({claimed_at} AS CHAR)" if claimed_at else columns
    where = _in(pk)
    return Stepped(
        lock=picked_ids_sql,
        update=where(f"UPDATE {table} SET {', '.join(sets)}"),  # noqa: S608 - names only
        read=where(f"SELECT {returned} FROM {table}"),  # noqa: S608 - names only
        split=lambda params: (params[set_params:], params[:set_params]),
    )


def resolve_edges(table, col: dict, picked_sql: str) -> Stepped:
    """resolve_edges on MariaDB: lock the unresolved edges ``picked_sql`` picks, UPDATE them
    resolved (the first parameter, the time), read back (id, child, parent, run_anyway)."""
    where = _in(col["id"])
    return Stepped(
        lock=picked_sql,
        update=where(f"UPDATE {table} SET {col['resolved_at']} = %s"),  # noqa: S608 - names only
        read=where(f"SELECT {col['id']}, {col['child']}, {col['parent']}, "  # noqa: S608
                   f"{col['run_anyway']} FROM {table}"),
        split=lambda params: (params[1:], params[:1]),
    )


#: The columns of record_outcomes' JSON document (pieces.outcome_row), as JSON_TABLE reads them.
OUTCOME_COLUMNS = (
    "id BIGINT PATH '$.id', token CHAR(36) PATH '$.token', status VARCHAR(16) PATH '$.status', "
    "result JSON PATH '$.result', errors JSON PATH '$.errors', "
    "run_at DATETIME(6) PATH '$.run_at', finished_at DATETIME(6) PATH '$.finished_at', "
    "give_back INT PATH '$.give_back', interrupted INT PATH '$.interrupted'"
)


def record_outcomes(table, col: dict) -> Stepped:
    """record_outcomes on MariaDB. One parameter, the JSON document of the outcomes (times
    as naive UTC text, as the column stores them), which ``JSON_TABLE`` turns into rows: lock
    the jobs still running under each outcome's claim token, in id order; UPDATE them from the
    document (a job whose cancel was asked for is written cancelled); read back (id, status)."""
    running = JobStatus.RUNNING.value
    values = f"JSON_TABLE(%s, '$[*]' COLUMNS ({OUTCOME_COLUMNS})) AS v"
    cancelled_at = f"job.{col['cancel_requested_at']}"
    not_cancelled = f"{cancelled_at} IS NULL"
    sets = ", ".join([
        f"job.{col['status']} = {cancel_wins(cancelled_at, 'v.status')}",
        # JSON null is SQL NULL, as the ORM stores None.
        f"job.{col['result']} = NULLIF(v.result, 'null')",
        f"job.{col['errors']} = COALESCE(v.errors, job.{col['errors']})",
        f"job.{col['run_at']} = COALESCE(v.run_at, job.{col['run_at']})",
        f"job.{col['finished_at']} = CASE WHEN {not_cancelled} THEN v.finished_at "
        f"ELSE COALESCE(v.finished_at, {now_sql()}) END",
        f"job.{col['lease_expires_at']} = NULL",
        f"job.{col['max_attempts']} = job.{col['max_attempts']} + COALESCE(v.give_back, 0)",
        f"job.{col['interruptions']} = job.{col['interruptions']} + COALESCE(v.interrupted, 0)",
    ])
    return Stepped(
        # The document first, each job then found by its primary key: the plan MariaDB chose on
        # a small table scanned it, locking every row it read, and so waited for rows other
        # transactions held (a transactional lane's, tests/integration/test_transactional_jobs).
        lock=(f"SELECT job.{col['id']} FROM {values} "  # noqa: S608 - names only
              f"STRAIGHT_JOIN {table} AS job FORCE INDEX (PRIMARY) ON job.{col['id']} = v.id "
              f"WHERE job.{col['claim_token']} = v.token AND job.{col['status']} = '{running}' "
              f"ORDER BY job.{col['id']} FOR UPDATE"),
        update=_in(f"job.{col['id']}")(
            f"UPDATE {table} AS job JOIN {values} "  # noqa: S608 - names only
            f"ON job.{col['id']} = v.id SET {sets}"),
        read=_in(col["id"])(f"SELECT {col['id']}, {col['status']} FROM {table}"),  # noqa: S608
        split=lambda params: (params, params),
    )


def rescue_jobs(table, col: dict, picked_sql: str, *, db_clock: bool) -> Stepped:
    """rescue_jobs on MariaDB: lock the rows ``picked_sql`` picks (skipping locked ones;
    locked, their claim token and lease cannot change before the UPDATE, which is the fence),
    UPDATE them as interrupted, read back (id, status). Parameters as ``rescue_jobs`` says."""
    now = now_sql() if db_clock else "%s"
    again_if = runs_again("", col)
    again = f"{col['cancel_requested_at']} IS NULL AND {again_if}"
    given_up = cancel_wins(col["cancel_requested_at"], f"'{JobStatus.EXHAUSTED.value}'")
    message = (f"LEFT(CONCAT('worker ', COALESCE({col['claimed_by']}, '?'), ' was lost while "
               f"running attempt ', {col['attempts']}, ' (', %s, '); interruption ', "
               f"{col['interruptions']} + 1, ' of ', {col['max_interruptions']}, "
               f"CASE WHEN {again_if} THEN '{INTERRUPTION_RUNS_AGAIN}' "
               f"ELSE '{INTERRUPTION_FINAL}' END), %s)")
    at = f"DATE_FORMAT({now}, '%%Y-%%m-%%dT%%H:%%i:%%s.%%f+00:00')"
    entry = (f"JSON_OBJECT('attempt', {col['attempts']}, 'at', {at}, 'type', %s, "
             f"'message', {message}, 'traceback', '', "
             f"'worker', COALESCE({col['claimed_by']}, ''), "
             "'interrupted', JSON_EXTRACT('true', '$'))")
    # Single-table UPDATE assigns left to right, each seeing the columns as already set: the
    # status and interruptions, which the others test, come last.
    sets = ", ".join([
        f"{col['errors']} = JSON_ARRAY_APPEND(COALESCE({col['errors']}, '[]'), '$', {entry})",
        f"{col['run_at']} = CASE WHEN {again} THEN {now} ELSE {col['run_at']} END",
        f"{col['finished_at']} = CASE WHEN {again} THEN {col['finished_at']} ELSE {now} END",
        f"{col['max_attempts']} = {col['max_attempts']} + CASE WHEN {again} THEN 1 ELSE 0 END",
        f"{col['lease_expires_at']} = NULL",
        f"{col['status']} = CASE WHEN {again} THEN '{JobStatus.QUEUED.value}' ELSE {given_up} END",
        f"{col['interruptions']} = {col['interruptions']} + 1",
    ])
    where = _in(col["id"])

    def split(params):
        clock, rest = (params[:0], params) if db_clock else (params[:1], params[1:])
        error_type, reason, limit = rest[-3:]
        # The update's placeholders in text order: errors' (at, type, reason, limit), run_at's
        # and finished_at's clocks; the clock only where it is a parameter.
        update = [*clock, error_type, reason, limit, *clock, *clock]
        return rest[:-3], update

    return Stepped(
        lock=picked_sql,
        update=lambda count: (f"{where(f'UPDATE {table} SET {sets}')(count)} "  # noqa: S608
                              f"AND {col['status']} = '{JobStatus.RUNNING.value}'"),
        read=where(f"SELECT {col['id']}, {col['status']} FROM {table}"),  # noqa: S608
        split=split,
    )


def advance_schedule(table, col: dict) -> Stepped:
    """advance_schedule on MariaDB: lock the schedule's row if it is still where the caller
    read it (``SKIP LOCKED``: a process that finds another one advancing it goes on), move its
    cursor, return its id. Parameters as ``advance_schedule`` says: three for the update, then
    three for the lock."""
    where = _in(col["id"])
    return Stepped(
        lock=(f"SELECT {col['id']} FROM {table} WHERE {col['id']} = %s "  # noqa: S608
              f"AND {col['next_run_at']} = %s AND {col['version']} = %s "
              f"AND {col['paused_at']} IS NULL AND {col['retired_at']} IS NULL "
              "FOR UPDATE SKIP LOCKED"),
        update=where(
            f"UPDATE {table} SET {col['next_run_at']} = %s, "  # noqa: S608 - names only
            f"{col['skipped_ticks']} = {col['skipped_ticks']} + %s, "
            f"{col['last_skipped_at']} = COALESCE(%s, {col['last_skipped_at']})"),
        read=where(f"SELECT {col['id']} FROM {table}"),  # noqa: S608 - names only
        split=lambda params: (params[3:], params[:3]),
    )


class LeaderElection(NamedTuple):
    """elect_leader on MariaDB, whose upsert cannot say "update only if" nor return the
    row: take or renew the leadership with an UPDATE whose WHERE is the election's rule, else
    insert it if it is vacant (``INSERT IGNORE``: a name already there is skipped). The affected
    row counts say who leads (Django connects with CLIENT_FOUND_ROWS: a matched row counts even
    when unchanged). The UPDATE comes first: an INSERT IGNORE that finds the row holds a shared
    lock on it, and two candidates each holding one and then updating would deadlock.
    Parameters: the name, the holder, the term in seconds."""

    insert: str
    update: str

    def run(self, cursor, params) -> list:
        name, holder, term = params
        cursor.execute(self.update, [holder, holder, term, name, holder, holder])
        if cursor.rowcount != 1:
            cursor.execute(self.insert, [name, holder, term])
            if cursor.rowcount != 1:
                return []
        return [(holder,)]


def elect_leader(table, col: dict, workers: str, worker_name: str) -> LeaderElection:
    now, later = now_sql(), now_sql(plus_seconds=True)
    return LeaderElection(
        insert=(f"INSERT IGNORE INTO {table} ({col['name']}, {col['holder']}, "  # noqa: S608
                f"{col['elected_at']}, {col['expires_at']}) VALUES (%s, %s, {now}, {later})"),
        # Assigned left to right: elected_at reads the holder before it changes.
        update=(
            f"UPDATE {table} SET {col['elected_at']} = CASE WHEN {col['holder']} = %s "  # noqa
            f"THEN {col['elected_at']} ELSE {now} END, {col['holder']} = %s, "
            f"{col['expires_at']} = {later} "
            f"WHERE {col['name']} = %s AND ({col['holder']} = %s OR {col['expires_at']} < {now} "
            f"OR ({col['holder']} NOT IN (SELECT {worker_name} FROM {workers}) "
            f"AND %s IN (SELECT {worker_name} FROM {workers})))"
        ),
    )


def insert_jobs(table, pk, names: list, columns: tuple, *, many: bool) -> str:
    """INSERT new jobs, returning their ids in insert order (insert_jobs on MariaDB).

    ``columns`` are ``(name, shared, is_json, document_type)`` as for ``insert_jobs``. One job
    is ``INSERT ... VALUES``; several are ``INSERT ... SELECT`` from ``JSON_TABLE`` over the
    document (one array per job), in the document's order, with the shared values as
    parameters: MariaDB has ``RETURNING`` on INSERT (10.5+), and ``JSON_TABLE`` (10.6+).
    """
    if not many:
        return (f"INSERT INTO {table} ({', '.join(names)}) "  # noqa: S608 - names only
                f"VALUES ({_ids(len(names))}) RETURNING {pk}")
    # The ordinality column keeps the document's order, and its rows' count when every value is
    # shared (the document then holds an empty array per job).
    select, document, position = [], ["`row_number` FOR ORDINALITY"], 0
    for _, shared, is_json, document_type in columns:
        if shared:
            select.append("%s")
            continue
        document.append(f"`c{position}` {document_type} PATH '$[{position}]'")
        # A JSON null is SQL NULL, as the ORM stores None.
        select.append(f"NULLIF(job.`c{position}`, 'null')" if is_json else f"job.`c{position}`")
        position += 1
    return (
        f"INSERT INTO {table} ({', '.join(names)}) "  # noqa: S608 - names only
        f"SELECT {', '.join(select)} FROM JSON_TABLE(%s, '$[*]' COLUMNS "
        f"({', '.join(document)})) AS job "
        f"ORDER BY job.`row_number` RETURNING {pk}"
    )


def delete_jobs(table, pk, picked_ids_sql: str) -> str:
    """delete_jobs on MariaDB, one statement: the picked ids through a derived table
    (MariaDB takes no LIMIT in an ``IN`` subquery, nor a subquery on the table it deletes
    from), ``DELETE ... RETURNING`` (10.0+)."""
    return (f"DELETE FROM {table} WHERE {pk} IN "  # noqa: S608 - names only
            f"(SELECT * FROM ({picked_ids_sql}) AS picked) RETURNING {pk}")


def add_throughput_counts(table, columns: str, count: str, row_count: int) -> str:
    """add_throughput_counts on MariaDB: ``ON DUPLICATE KEY UPDATE`` (the bucket's unique
    key) adds the count to the row already there. Parameters: six per row."""
    values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * row_count)
    return (f"INSERT INTO {table} ({columns}) VALUES {values} "  # noqa: S608 - names only
            f"ON DUPLICATE KEY UPDATE {count} = {count} + VALUES({count})")
