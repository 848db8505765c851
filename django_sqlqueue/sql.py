"""The few statements the ORM cannot say in one round trip, each named and explained.

On MariaDB (``vendor == "mysql"``) several become what sql_mariadb.py builds: objects of a few
statements where others have one ``UPDATE ... RETURNING``; ``returning.fetch`` runs either.

Values always travel as query parameters; only column and table names (quoted by the backend)
and the status constants of statuses.py are put into the SQL text.
"""

import datetime as dt
import json

from django.conf import settings
from django.db.models import DateTimeField, Func

from . import sql_mariadb
from .statuses import INTERRUPTION_FINAL, INTERRUPTION_RUNS_AGAIN, READY_STATUSES, JobStatus

# ---- the database's clock ---------------------------------------------------------------------
# Leases, heartbeats and claim times are read off the database's clock, never a host's: hosts'
# clocks disagree, and a claim may wait for a lock after Python read the time (SQLite's write
# lock), so a lease computed before the wait could already be over when the claim takes the row.

def now_sql(connection, plus_seconds: bool = False, *, in_filter: bool = False) -> str:
    """SQL text for "now" by the database's clock, read when the statement gets to it (after
    any lock it waited for), as the column type stores it; with ``plus_seconds``, plus a number
    of seconds given as the next parameter. For text passed to ``cursor.execute`` with params
    (a literal ``%`` doubled). ``in_filter``: for a WHERE condition, where PostgreSQL needs a
    value that is stable within the statement to use an index."""
    if connection.vendor == "postgresql":
        # clock_timestamp(), not now(): now() is the start of the transaction. As a scalar
        # subquery, read once per statement, when first needed (after the rows were locked), so
        # that every row of one claim gets the same time. In a filter, statement_timestamp():
        # the start of this statement, one value for every row, which an index can use.
        clock = "statement_timestamp()" if in_filter else "(SELECT clock_timestamp())"
        return f"({clock} + make_interval(secs => %s))" if plus_seconds else clock
    if connection.vendor == "mysql":
        return sql_mariadb.now_sql(plus_seconds)
    # SQLite computes 'now' once per statement step, after taking its write lock, to the
    # millisecond. We write the end of that millisecond: never earlier than a time Python wrote
    # to the microsecond just before (a job's enqueued_at and run_at), and text exactly as
    # Django writes the same time ('YYYY-MM-DD HH:MM:SS.ffffff', the microseconds never zero),
    # so that a value read back and compared for equality (a fence on the lease) matches.
    shift = ", printf('%%+.6f seconds', %s)" if plus_seconds else ""
    # Django stores UTC with USE_TZ, local time without it.
    local = "" if settings.USE_TZ else ", 'localtime'"
    return f"(strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'{local}{shift}) || '999')"


class DatabaseNow(Func):
    """``now_sql`` as an ORM expression: ``.update(lease_expires_at=DatabaseNow(30))``, or in a
    filter, ``.filter(run_at__lte=DatabaseNow(in_filter=True))``."""

    output_field = DateTimeField()

    def __init__(self, plus_seconds: float | None = None, *, in_filter: bool = False):
        super().__init__()
        self.plus_seconds = plus_seconds
        self.in_filter = in_filter

    def as_sql(self, compiler, connection, **extra_context):
        if self.plus_seconds is None:
            return now_sql(connection, in_filter=self.in_filter), []
        return (now_sql(connection, plus_seconds=True, in_filter=self.in_filter),
                [float(self.plus_seconds)])


def ready_ids(model, connection, *, queue_count: int | None, db_clock: bool = True):
    """SELECT the ids of ready jobs in claim order, up to a limit; returns the SQL text.

    Parameters, in order: (without ``db_clock``: now, now,) the queue names (``queue_count`` of
    them; ``None`` means every queue, with no queue condition), the limit. With ``db_clock``
    "now" is the database's clock when the statement gets to the rows.

    This is ``Job.objects.ready(now).in_queues(...).order_by(*CLAIM_ORDER)[:limit]`` written out
    once, because compiling that queryset on every claim cost more than running it. The status
    list is in the text, not a parameter, so that the partial ready indexes match it even with
    server-side binding. With one queue the condition is ``queue = %s``, so the claim walks
    ``sqlqueue_job_ready``; with every queue it walks ``sqlqueue_job_ready_any_queue``.
    """
    quote = connection.ops.quote_name
    col = {name: quote(model._meta.get_field(name).column) for name in
           ("id", "status", "run_at", "expires_at", "queue", "priority")}
    statuses = ", ".join(f"'{status}'" for status in READY_STATUSES)
    now = now_sql(connection, in_filter=True) if db_clock else "%s"
    queue = ""
    if queue_count == 1:
        queue = f" AND {col['queue']} = %s"
    elif queue_count:
        queue = f" AND {col['queue']} IN ({', '.join(['%s'] * queue_count)})"
    skip_locked = connection.features.has_select_for_update_skip_locked
    lock = " FOR UPDATE SKIP LOCKED" if skip_locked else ""
    ready = _ready_index_prefix(connection)
    return (
        f"SELECT {col['id']} FROM {quote(model._meta.db_table)} "  # noqa: S608 - names only
        f"WHERE {ready}{col['status']} IN ({statuses}) AND {col['run_at']} <= {now} "
        f"AND ({col['expires_at']} IS NULL OR {col['expires_at']} > {now}){queue} "
        f"ORDER BY {col['priority']} DESC, {col['run_at']}, {col['id']} LIMIT %s{lock}"
    )


def ready_ids_after(model, connection, *, queue_count: int | None, db_clock: bool = True):
    """SELECT the ids of ready jobs that come after a position in claim order (a priority, a
    run_at and an id: the last job this worker claimed), in claim order, up to a limit; returns
    the SQL text. The bounded claim of worker/claim_bound.py.

    Parameters, in order: ``ready_ids``'s for the rest of the same priority, without the
    limit (now, now, the queues), then the position's priority, run_at and id, the limit; then
    ``ready_ids``'s again for the lower priorities, the position's priority, the limit; last
    the limit of the whole.

    Why not ``ready_ids`` with one more condition: behind a long transaction elsewhere, the
    ready index keeps an entry for every job claimed since it began (the snapshot may still
    see the row as ready, so they cannot be removed or marked dead), and they come first in
    claim order: ``ready_ids`` visits the table for each of them on every claim. Here each
    part starts its index scan at its bound, past them. Claim order is (priority DESC, run_at,
    id), so "after" is two index ranges: the same priority with (run_at, id) after the
    position (a row comparison, which starts the range), then every lower priority. One
    ``OR`` would not start a range; a ``UNION ALL`` of two parts, each with its own ORDER BY,
    LIMIT and lock, does, and its second part is not run when the first fills the limit.
    """
    quote = connection.ops.quote_name
    col = {name: quote(model._meta.get_field(name).column) for name in
           ("id", "run_at", "priority")}
    ready = ready_ids(model, connection, queue_count=queue_count, db_clock=db_clock)
    head, order = ready.split(" ORDER BY ", 1)  # the ready conditions; the order, limit, lock
    tail = order.split(" LIMIT ", 1)[1]  # "%s" and the lock
    same = (f"{head} AND {col['priority']} = %s AND ({col['run_at']}, {col['id']}) > (%s, %s) "
            f"ORDER BY {col['run_at']}, {col['id']} LIMIT {tail}")
    lower = f"{head} AND {col['priority']} < %s ORDER BY {order}"
    return (
        f"SELECT {col['id']} FROM (SELECT {col['id']} FROM ({same}) AS same_priority "  # noqa: S608
        f"UNION ALL SELECT {col['id']} FROM ({lower}) AS lower_priority) AS bounded LIMIT %s"
    )


def _ready_index_prefix(connection) -> str:
    """The condition that lets MariaDB use its ready indexes, which lead with a generated column
    (sql_mariadb.py) that its optimizer does not derive from the status condition; "" on the
    databases with partial indexes."""
    if connection.vendor != "mysql":
        return ""
    return f"{connection.ops.quote_name(sql_mariadb.READY_COLUMN)} = 1 AND "


# ---- the claim of paused and limited queues (queue_limits.py) ------------------------------
# Only a worker that finds a queue paused or limited in the Queue table runs these; the claim of
# every other queue is ready_ids + claim_jobs, one statement.

def ready_queues(model, connection) -> str:
    """SELECT the distinct queue names of ready rows, in name order, up to a limit (parameter);
    returns the SQL text. A skip scan: one probe of ``sqlqueue_job_ready`` per queue, however
    many rows each holds, where ``SELECT DISTINCT`` would read every ready row. Due or not
    (a queue found with only later jobs costs its claim one empty probe)."""
    return _ready_distinct(model, connection, "queue", "")


def ready_keys(model, connection) -> str:
    """SELECT the distinct concurrency keys (not "", no key) of one queue's ready rows, in key
    order, up to a limit; returns the SQL text. Parameters: the queue, the queue again, the
    limit. A skip scan of ``sqlqueue_job_ready_by_key``: one probe per key, so a key with a
    backlog of 100,000 jobs costs what a key with one costs."""
    quote = connection.ops.quote_name
    queue = f"{quote(model._meta.get_field('queue').column)} = %s AND "
    return _ready_distinct(model, connection, "concurrency_key", queue, after="''")


def _ready_distinct(model, connection, field: str, queue: str, after="") -> str:
    """The recursive skip scan of ready_queues and ready_keys: each step finds the smallest
    value above the previous one (``queue`` is the text of a leading condition, or ""; the
    first value is above ``after``, SQL text of a constant, or any non-NULL one)."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    column = quote(model._meta.get_field(field).column)
    statuses = ", ".join(f"'{status}'" for status in READY_STATUSES)
    status = quote(model._meta.get_field("status").column)
    ready = _ready_index_prefix(connection)
    probe = (f"SELECT {column} FROM {table} "  # noqa: S608 - names and status constants only
             f"WHERE {ready}{queue}{status} IN ({statuses}) AND {column} ")
    first = f"> {after}" if after else "IS NOT NULL"
    return (
        f"WITH RECURSIVE found(value) AS ("  # noqa: S608 - names only
        f"SELECT ({probe}{first} ORDER BY {column} LIMIT 1) "
        f"UNION ALL SELECT ({probe}> found.value ORDER BY {column} LIMIT 1) "
        f"FROM found WHERE found.value IS NOT NULL) "
        f"SELECT value FROM found WHERE value IS NOT NULL LIMIT %s"
    )


def ready_ids_by_key(model, connection, queue: str, wanted: dict, now):
    """SELECT (id, concurrency key, priority, run_at) of the first ready rows of one queue's
    keys, each key's in claim order, at most ``wanted[key]`` of each (the key "" is the jobs
    without a key); returns (sql, params). The caller merges them in claim order.

    Each key's rows are read from its own range of ``sqlqueue_job_ready_by_key`` and the read
    stops after ``wanted[key]`` rows, so the rows of keys left out (those at their limit) are
    never read. On PostgreSQL one LATERAL join over the arrays of keys and counts: the text is
    the same for any number of keys (planning a UNION ALL of 100 parts cost more than running
    it). SQLite has no LATERAL: a ``UNION ALL`` of one subquery per key (at most 500 parts).
    """
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    col = {name: quote(model._meta.get_field(name).column) for name in
           ("id", "status", "run_at", "expires_at", "queue", "priority", "concurrency_key")}
    statuses = ", ".join(f"'{status}'" for status in READY_STATUSES)
    columns = f"{col['id']}, {col['concurrency_key']}, {col['priority']}, {col['run_at']}"
    ready = _ready_index_prefix(connection)
    rows = (f"SELECT {columns} FROM {table} "  # noqa: S608 - names and status constants only
            f"WHERE {ready}{col['status']} IN ({statuses}) AND {col['run_at']} <= %s "
            f"AND ({col['expires_at']} IS NULL OR {col['expires_at']} > %s) "
            f"AND {col['queue']} = %s AND {col['concurrency_key']} ")  # then the key's test
    order = f" ORDER BY {col['priority']} DESC, {col['run_at']}, {col['id']} LIMIT "
    if connection.vendor == "postgresql":
        # The key as a range of one value, and sorted by first: with "= wanted.k" the key's
        # order is implied, sqlqueue_job_ready serves the same order, and PostgreSQL sometimes
        # walked that one, filtering out a key's 100,000 rows to find another's. Only
        # sqlqueue_job_ready_by_key gives this order without a sort.
        key_range = (f">= wanted.k AND {col['concurrency_key']} <= wanted.k ORDER BY "
                     f"{col['concurrency_key']}, {col['priority']} DESC, {col['run_at']}, "
                     f"{col['id']} LIMIT wanted.n")
        return (
            f"SELECT part.* FROM unnest(%s::text[], %s::int[]) AS wanted(k, n) "  # noqa: S608
            f"CROSS JOIN LATERAL ({rows}{key_range}) AS part",
            [list(wanted), list(wanted.values()), now, now, queue])
    parts = [f"SELECT * FROM ({rows}= %s{order}%s) AS part{number}"  # noqa: S608 - names only
             for number in range(len(wanted))]
    params = [value for key, count in wanted.items() for value in (now, now, queue, key, count)]
    return " UNION ALL ".join(parts), params


#: How ``claim_jobs`` sets a column: from a parameter, to the database's "now", or to "now"
#: plus the seconds of a parameter.
PARAM, NOW, NOW_PLUS = "param", "now", "now plus"


def claim_jobs(picked_ids_sql: str, model, connection, assignments, returning):
    """UPDATE the picked rows and return the columns of ``returning`` (field names); returns the
    SQL text. ``assignments`` are ``(field name, PARAM | NOW | NOW_PLUS)``: their parameters, in
    that order, come before those of ``picked_ids_sql``. With NOW, each row also returns, last,
    the time set as text (the same for every row: the caller parses it once, not per row).

    ``picked_ids_sql`` selects the ids to claim; on PostgreSQL it ends in ``FOR UPDATE SKIP
    LOCKED``, so concurrent claimers each lock different rows and never wait for each other. On
    SQLite the single UPDATE statement runs under the database's write lock, and its WHERE re-reads
    the rows as they are then, so two claimers can never update the same row either. One
    statement is atomic on its own: it needs no surrounding transaction (no BEGIN/COMMIT round
    trips). NOW is read after the row is taken (after SQLite's write lock was granted), so a claim
    never starts with a lease shortened by its wait.

    ``attempts`` is always incremented in SQL (not from a value read earlier). On MariaDB, which
    has no ``UPDATE ... RETURNING``, the statement is a ``sql_mariadb.Stepped`` (as are
    record_outcomes', rescue_jobs' and advance_schedule's): run it with ``returning.fetch``.
    """
    quote = connection.ops.quote_name
    clock, clock_from = "", ""
    if connection.vendor == "postgresql":
        # One reading of the clock for every row and column of the claim: NOW_PLUS is then
        # exactly NOW plus the seconds, and the caller can compute it instead of reading it back.
        # A materialised CTE is read once (a subquery in FROM would run again for every row).
        clock = "WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now) "
        clock_from = " FROM clock"
        values = {PARAM: "%s", NOW: "clock.now",
                  NOW_PLUS: "(clock.now + make_interval(secs => %s))"}
    else:
        values = {PARAM: "%s", NOW: now_sql(connection),
                  NOW_PLUS: now_sql(connection, plus_seconds=True)}
    sets = [f"{quote(model._meta.get_field(name).column)} = {values[how]}"
            for name, how in assignments]
    attempts = quote(model._meta.get_field("attempts").column)
    sets.append(f"{attempts} = {attempts} + 1")
    columns = ", ".join(quote(model._meta.get_field(name).column) for name in returning)
    if connection.vendor == "mysql":
        # The column set to NOW, read back as text like PostgreSQL's clock.now::text.
        claimed_at = next((quote(model._meta.get_field(name).column)
                           for name, how in assignments if how == NOW), None)
        return sql_mariadb.claim_jobs(
            picked_ids_sql, quote(model._meta.db_table), quote(model._meta.pk.column), sets,
            sum(how != NOW for _, how in assignments), columns, claimed_at)
    if any(how == NOW for _, how in assignments):
        columns += ", clock.now::text" if clock else f", {values[NOW]}"
    return (
        f"{clock}UPDATE {quote(model._meta.db_table)} "  # noqa: S608 - names only
        f"SET {', '.join(sets)}{clock_from} "
        f"WHERE {quote(model._meta.pk.column)} IN ({picked_ids_sql}) RETURNING {columns}"
    )


def record_outcomes(model, connection, rows):
    """Write the outcomes of many running jobs in one statement, each fenced; (sql, params).

    ``rows`` are ``(id, claim_token, status, result, errors, run_at, finished_at, give_back,
    interrupted)`` as Python values (outcomes.Transition): ``errors`` and ``run_at`` None leave
    the column as it is; ``give_back`` raises max_attempts by one, ``interrupted``
    interruptions. Each row is written only while the job is still
    running under that claim token, and RETURNING lists the ids written, so the caller knows which
    claims were still valid, with the status written. A job whose cancel was asked for
    (``cancel_requested_at`` set) is written ``cancelled`` whatever the outcome, finished now if
    the outcome had no finish time: a success, failure or release that raced the request can
    neither overwrite it nor let the job run again. On PostgreSQL the rows travel as one JSON
    document that
    ``json_to_recordset`` turns into typed columns: one parameter whatever the batch size, built
    by ``json.dumps`` in C. A JSON null result is stored as SQL NULL, as the ORM stores None.
    """
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    col = {name: quote(model._meta.get_field(name).column) for name in (
        "id", "claim_token", "status", "result", "errors", "run_at", "finished_at",
        "lease_expires_at", "max_attempts", "cancel_requested_at", "interruptions")}
    running = JobStatus.RUNNING.value
    succeeded = JobStatus.SUCCEEDED.value
    cancelled = JobStatus.CANCELLED.value
    now = now_sql(connection)  # when a cancelled job finished, if its outcome does not say
    if connection.vendor == "mysql":
        # Times as the column stores them (naive UTC text with USE_TZ). In id order: the lock
        # step reads the document's rows in order and locks each job as it goes, and locks
        # taken in another order than a concurrent UPDATE's (a heartbeat's, by id) deadlock.
        to_db = connection.ops.adapt_datetimefield_value
        document = json.dumps([_outcome_row(*row, time_text=to_db)
                               for row in sorted(rows, key=lambda row: row[0])])
        return sql_mariadb.record_outcomes(table, col), [document]
    if all(row[2] == succeeded for row in rows):
        # Nearly every batch: successes only, which set fewer columns (measured: the general
        # statement cost PostgreSQL 10% more per job, and the worker a JSON key per column).
        return _record_successes(table, col, connection, model, rows)
    if connection.vendor == "postgresql":
        document = json.dumps([_outcome_row(*row) for row in rows])
        sql = (
            f"UPDATE {table} AS job SET {col['status']} = "  # noqa: S608 - names only
            f"CASE WHEN job.{col['cancel_requested_at']} IS NULL THEN v.status "
            f"ELSE '{cancelled}' END, "
            f"{col['result']} = v.result, "
            f"{col['errors']} = COALESCE(v.errors, job.{col['errors']}), "
            f"{col['run_at']} = COALESCE(v.run_at, job.{col['run_at']}), "
            f"{col['finished_at']} = CASE WHEN job.{col['cancel_requested_at']} IS NULL "
            f"THEN v.finished_at ELSE COALESCE(v.finished_at, {now}) END, "
            f"{col['lease_expires_at']} = NULL, "
            f"{col['max_attempts']} = job.{col['max_attempts']} + COALESCE(v.give_back, 0), "
            f"{col['interruptions']} = job.{col['interruptions']} + COALESCE(v.interrupted, 0) "
            "FROM json_to_recordset(%s::json) AS v (id bigint, token uuid, status text, "
            "result jsonb, errors jsonb, run_at timestamptz, finished_at timestamptz, "
            "give_back int, interrupted int) "
            f"WHERE job.{col['id']} = v.id AND job.{col['claim_token']} = v.token "
            f"AND job.{col['status']} = '{running}' RETURNING job.{col['id']}, job.{col['status']}"
        )
        return sql, [document]
    # SQLite 3.35+: UPDATE ... FROM (VALUES ...), whose columns are column1..column9.
    fields = [model._meta.get_field(name) for name in (
        "id", "claim_token", "status", "result", "errors", "run_at", "finished_at")]
    params = _values_params(connection, [*fields, None, None],
                            [(*row[:7], int(row[7]), int(row[8])) for row in rows])
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(rows))
    sql = (
        f"UPDATE {table} SET {col['status']} = "  # noqa: S608 - names only
        f"CASE WHEN {table}.{col['cancel_requested_at']} IS NULL THEN v.column3 "
        f"ELSE '{cancelled}' END, "
        f"{col['result']} = v.column4, "
        f"{col['errors']} = COALESCE(v.column5, {table}.{col['errors']}), "
        f"{col['run_at']} = COALESCE(v.column6, {table}.{col['run_at']}), "
        f"{col['finished_at']} = CASE WHEN {table}.{col['cancel_requested_at']} IS NULL "
        f"THEN v.column7 ELSE COALESCE(v.column7, {now}) END, "
        f"{col['lease_expires_at']} = NULL, "
        f"{col['max_attempts']} = {table}.{col['max_attempts']} + v.column8, "
        f"{col['interruptions']} = {table}.{col['interruptions']} + v.column9 "
        f"FROM (VALUES {values}) AS v "
        f"WHERE {table}.{col['id']} = v.column1 AND {table}.{col['claim_token']} = v.column2 "
        f"AND {table}.{col['status']} = '{running}' "
        f"RETURNING {table}.{col['id']}, {table}.{col['status']}"
    )
    return sql, params


# ---- maintenance: the leader lease, set-based rescue, batched deletes ------------------------
# Used by worker/leader.py, worker/rescuer.py, worker/cleaner.py and the queryset methods behind
# them (queries.py: rescue, delete_in_batches). Each statement is one short transaction's work.

def elect_leader(model, worker_model, connection) -> str:
    """Take or renew a leadership for a holder unless another holder's term is still running;
    SQL text whose RETURNING gives the holder only when it now leads.

    Parameters, in order: the leadership's name, the holder, the term in seconds. One upsert
    (PostgreSQL 9.5+, SQLite 3.35+), by the database's clock: a vacant name is inserted; the
    holder's own term is renewed; another holder's term is taken over once it has run out, or,
    by a registered worker, at once when that holder has no worker row (a worker that exited
    cleanly or was reaped, or a caller that is not a worker).
    Two candidates at once: on PostgreSQL the second waits for the first's row and then finds a
    running term; on SQLite the write lock orders them the same way. ``elected_at`` keeps the
    start of the holder's reign.
    """
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    col = {name: quote(model._meta.get_field(name).column) for name in
           ("name", "holder", "elected_at", "expires_at")}
    workers = quote(worker_model._meta.db_table)
    worker_name = quote(worker_model._meta.get_field("name").column)
    if connection.vendor == "mysql":
        return sql_mariadb.elect_leader(table, col, workers, worker_name)
    now, later = now_sql(connection), now_sql(connection, plus_seconds=True)
    return (
        f"INSERT INTO {table} ({col['name']}, {col['holder']}, {col['elected_at']}, "  # noqa: S608
        f"{col['expires_at']}) VALUES (%s, %s, {now}, {later}) "
        f"ON CONFLICT ({col['name']}) DO UPDATE SET {col['holder']} = excluded.{col['holder']}, "
        f"{col['elected_at']} = CASE WHEN {table}.{col['holder']} = excluded.{col['holder']} "
        f"THEN {table}.{col['elected_at']} ELSE excluded.{col['elected_at']} END, "
        f"{col['expires_at']} = excluded.{col['expires_at']} "
        f"WHERE {table}.{col['holder']} = excluded.{col['holder']} "
        f"OR {table}.{col['expires_at']} < excluded.{col['elected_at']} "
        f"OR ({table}.{col['holder']} NOT IN (SELECT {worker_name} FROM {workers}) "
        f"AND excluded.{col['holder']} IN (SELECT {worker_name} FROM {workers})) "
        f"RETURNING {col['holder']}"
    )


def rescue_jobs(model, connection, picked_sql: str, *, db_clock: bool = True) -> str:
    """Give back, in one UPDATE, the running jobs that ``picked_sql`` selects as interrupted:
    their worker was lost; SQL text whose RETURNING gives (id, new status) of each job rescued.

    ``picked_sql`` selects columns named ``id, claim_token, lease_expires_at`` (on PostgreSQL
    with ``FOR UPDATE SKIP LOCKED``). Parameters, in order: (without ``db_clock``: now,) those of
    ``picked_sql``, the error type, the reason, the longest message kept. A lost worker is not
    the job's failure: each job becomes ``queued`` and due now, its attempt given back (as
    ``outcomes.interruption`` writes it) and ``interruptions`` raised by one; once that reaches
    ``max_interruptions`` it becomes ``exhausted`` instead (``cancelled`` if its cancel was
    asked for), so that a job that kills its workers is not run forever. Either way the entry
    ``outcomes.interruption_entry`` would append: ``{"attempt", "at", "type", "message",
    "traceback": "", "worker", "interrupted": true}``. Fenced on the claim token and the lease
    as read, so a heartbeat that renewed the lease meanwhile wins (on PostgreSQL the picked rows
    are locked, on SQLite the statement runs under the write lock).
    """
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    col = {name: quote(model._meta.get_field(name).column) for name in (
        "id", "status", "attempts", "max_attempts", "run_at", "finished_at", "lease_expires_at",
        "claim_token", "claimed_by", "errors", "cancel_requested_at", "interruptions",
        "max_interruptions")}
    if connection.vendor == "mysql":
        return sql_mariadb.rescue_jobs(table, col, picked_sql, db_clock=db_clock)
    message = (f"'worker ' || COALESCE(job.{col['claimed_by']}, '?') || ' was lost while "
               f"running attempt ' || job.{col['attempts']} || ' (' || %s || '); interruption ' "
               f"|| (job.{col['interruptions']} + 1) || ' of ' || job.{col['max_interruptions']} "
               f"|| CASE WHEN {_runs_again('job.', col)} THEN '{INTERRUPTION_RUNS_AGAIN}' "
               f"ELSE '{INTERRUPTION_FINAL}' END")
    if connection.vendor == "postgresql":
        now = now_sql(connection) if db_clock else "%s::timestamptz"
        at = "to_char(clock.now AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"
        entry = (f"jsonb_build_object('attempt', job.{col['attempts']}, 'at', {at}, "
                 f"'type', %s::text, 'message', left({message}, %s), 'traceback', '', "
                 f"'worker', COALESCE(job.{col['claimed_by']}, ''), 'interrupted', true)")
        errors = f"COALESCE(job.{col['errors']}, '[]'::jsonb) || jsonb_build_array({entry})"
        same = "IS NOT DISTINCT FROM"
        returning = f"job.{col['id']}, job.{col['status']}"  # unqualified: also picked's
    else:
        now = now_sql(connection, in_filter=True) if db_clock else "%s"
        at = "replace(clock.now, ' ', 'T') || '+00:00'"
        entry = (f"json_object('attempt', job.{col['attempts']}, 'at', {at}, "
                 f"'type', %s, 'message', substr({message}, 1, %s), 'traceback', '', "
                 f"'worker', COALESCE(job.{col['claimed_by']}, ''), 'interrupted', json('true'))")
        errors = f"json_insert(COALESCE(job.{col['errors']}, '[]'), '$[#]', {entry})"
        same = "IS"
        returning = f"{col['id']}, {col['status']}"  # SQLite's RETURNING takes no table alias
    # A job whose cancel was asked for ends cancelled: it must not run again.
    again = f"job.{col['cancel_requested_at']} IS NULL AND {_runs_again('job.', col)}"
    given_up = (f"CASE WHEN job.{col['cancel_requested_at']} IS NULL "
                f"THEN '{JobStatus.EXHAUSTED.value}' ELSE '{JobStatus.CANCELLED.value}' END")
    # picked is a materialised CTE: as a subquery joined in FROM, PostgreSQL may run it more
    # than once, and with SKIP LOCKED each run picks other rows (a LIMIT of 2 rescued 4).
    return (
        f"WITH clock AS (SELECT {now} AS now), "  # noqa: S608 - names and status constants only
        f"picked AS MATERIALIZED ({picked_sql}) "
        f"UPDATE {table} AS job SET "
        f"{col['status']} = CASE WHEN {again} THEN '{JobStatus.QUEUED.value}' ELSE {given_up} END, "
        f"{col['run_at']} = CASE WHEN {again} THEN clock.now ELSE job.{col['run_at']} END, "
        f"{col['finished_at']} = CASE WHEN {again} THEN job.{col['finished_at']} "
        f"ELSE clock.now END, "
        f"{col['max_attempts']} = job.{col['max_attempts']} "
        f"+ CASE WHEN {again} THEN 1 ELSE 0 END, "
        f"{col['interruptions']} = job.{col['interruptions']} + 1, "
        f"{col['lease_expires_at']} = NULL, {col['errors']} = {errors} "
        f"FROM clock, picked "
        f"WHERE job.{col['id']} = picked.{col['id']} "
        f"AND job.{col['status']} = '{JobStatus.RUNNING.value}' "
        f"AND job.{col['claim_token']} {same} picked.{col['claim_token']} "
        f"AND job.{col['lease_expires_at']} {same} picked.{col['lease_expires_at']} "
        f"RETURNING {returning}"
    )


def _runs_again(prefix: str, col: dict) -> str:
    """Whether an interrupted job runs again: its interruptions, this one included, are fewer
    than its max_interruptions (every column read as before the UPDATE)."""
    return f"{prefix}{col['interruptions']} + 1 < {prefix}{col['max_interruptions']}"


def session_utc_offset(connection) -> str:
    """MariaDB: SELECT how many seconds the session's time zone is ahead of UTC (0 when it is
    UTC), which ``CURRENT_TIMESTAMP`` column defaults follow (checks.py)."""
    return "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())"


def read_clock(connection) -> str:
    """SELECT the database's "now" (``now_sql``), for Python code that needs it as a value: the
    scheduler decides which ticks are due by it. Execute with an empty parameter list."""
    now = now_sql(connection)
    return f"SELECT {now}"


def advance_schedule(model, connection) -> str:
    """Move one schedule's cursor, if it is still where the caller read it; SQL text whose
    RETURNING gives the schedule's id when it moved.

    Parameters, in order: the new ``next_run_at``, the number of ticks skipped, the latest tick
    skipped (None keeps the column), then the schedule's id, its ``next_run_at`` and
    ``version`` as read. The row must also still be active (not paused, not retired).

    This is the one write that decides a tick: the caller enqueues the tick's job in the same
    transaction only when a row came back, so of any number of processes that read the same
    cursor, exactly one enqueues. On PostgreSQL the row is picked ``FOR UPDATE SKIP LOCKED``: a
    process that finds another one advancing it goes on at once instead of waiting for its
    commit (and, read committed, a row advanced meanwhile no longer matches the cursor). On
    SQLite the statement runs under the database's write lock, and as the transaction's first
    statement it takes that lock before reading anything.
    """
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    col = {name: quote(model._meta.get_field(name).column) for name in (
        "id", "next_run_at", "version", "paused_at", "retired_at", "skipped_ticks",
        "last_skipped_at")}
    if connection.vendor == "mysql":
        return sql_mariadb.advance_schedule(table, col)
    skip_locked = connection.features.has_select_for_update_skip_locked
    lock = " FOR UPDATE SKIP LOCKED" if skip_locked else ""
    return (
        f"UPDATE {table} SET {col['next_run_at']} = %s, "  # noqa: S608 - names only
        f"{col['skipped_ticks']} = {col['skipped_ticks']} + %s, "
        f"{col['last_skipped_at']} = COALESCE(%s, {col['last_skipped_at']}) "
        f"WHERE {col['id']} IN (SELECT {col['id']} FROM {table} WHERE {col['id']} = %s "
        f"AND {col['next_run_at']} = %s AND {col['version']} = %s "
        f"AND {col['paused_at']} IS NULL AND {col['retired_at']} IS NULL{lock}) "
        f"RETURNING {col['id']}"
    )


def delete_jobs(model, connection, picked_ids_sql: str) -> str:
    """DELETE the jobs whose ids ``picked_ids_sql`` selects, in one statement; SQL text whose
    RETURNING gives their ids. Parameters: those of ``picked_ids_sql``."""
    quote = connection.ops.quote_name
    pk = quote(model._meta.pk.column)
    if connection.vendor == "mysql":
        return sql_mariadb.delete_jobs(quote(model._meta.db_table), pk, picked_ids_sql)
    return (f"DELETE FROM {quote(model._meta.db_table)} "  # noqa: S608 - names only
            f"WHERE {pk} IN ({picked_ids_sql}) RETURNING {pk}")


def statement_timeout(connection) -> str | None:
    """SQL text that limits each later statement of the current transaction to the number of
    milliseconds of its parameter (PostgreSQL's ``SET LOCAL statement_timeout``, which takes no
    parameter, as a function); None where the database has no such limit (SQLite)."""
    if connection.vendor == "postgresql":
        return "SELECT set_config('statement_timeout', %s, true)"
    return None


def _record_successes(table, col, connection, model, rows):
    """record_outcomes for rows that are all successes: status, result and finished_at (a
    job whose cancel was asked for ends cancelled, its result kept)."""
    running, succeeded = JobStatus.RUNNING.value, JobStatus.SUCCEEDED.value
    cancelled = JobStatus.CANCELLED.value
    if connection.vendor == "postgresql":
        status = (f"CASE WHEN job.{col['cancel_requested_at']} IS NULL THEN '{succeeded}' "
                  f"ELSE '{cancelled}' END")
        document = json.dumps([
            {"id": pk, "token": str(token), "result": result,
             "finished_at": finished_at.isoformat()}
            for pk, token, _, result, _, _, finished_at, *_ in rows
        ])
        sql = (
            f"UPDATE {table} AS job SET {col['status']} = {status}, "  # noqa: S608
            f"{col['result']} = v.result, {col['finished_at']} = v.finished_at, "
            f"{col['lease_expires_at']} = NULL "
            "FROM json_to_recordset(%s::json) "
            "AS v (id bigint, token uuid, result jsonb, finished_at timestamptz) "
            f"WHERE job.{col['id']} = v.id AND job.{col['claim_token']} = v.token "
            f"AND job.{col['status']} = '{running}' RETURNING job.{col['id']}, job.{col['status']}"
        )
        return sql, [document]
    fields = [model._meta.get_field(name) for name in ("id", "claim_token", "result",
                                                          "finished_at")]
    params = _values_params(connection, fields, [
        (pk, token, result, finished_at) for pk, token, _, result, _, _, finished_at, *_ in rows])
    values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    status = (f"CASE WHEN {table}.{col['cancel_requested_at']} IS NULL THEN '{succeeded}' "
              f"ELSE '{cancelled}' END")
    sql = (
        f"UPDATE {table} SET {col['status']} = {status}, "  # noqa: S608
        f"{col['result']} = v.column3, {col['finished_at']} = v.column4, "
        f"{col['lease_expires_at']} = NULL "
        f"FROM (VALUES {values}) AS v "
        f"WHERE {table}.{col['id']} = v.column1 AND {table}.{col['claim_token']} = v.column2 "
        f"AND {table}.{col['status']} = '{running}' "
        f"RETURNING {table}.{col['id']}, {table}.{col['status']}"
    )
    return sql, params


def _values_params(connection, fields, rows) -> list:
    """The parameters of a ``VALUES`` list (SQLite): each value as its field saves it (a field of
    None: the value as it is), NULL as NULL."""
    return [
        value if value is None or field is None else field.get_db_prep_save(value, connection)
        for row in rows for field, value in zip(fields, row, strict=True)
    ]


def _outcome_row(pk, token, status, result, errors, run_at, finished_at, give_back,
                 interrupted, *, time_text=dt.datetime.isoformat) -> dict:
    """One row of record_outcomes' document; keys left out are NULL (most outcomes are
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


def insert_jobs(model, connection, columns: tuple, *, notify: bool, many: bool) -> str:
    """INSERT new jobs on PostgreSQL (on MariaDB: sql_mariadb.insert_jobs), returning their ids
    in insert order; returns the SQL text (inserting.py decides what goes where and why).

    ``columns`` are ``(name, shared, is_json, sql_type)``: a shared value is one parameter for
    every row; the others come from the JSON document of ``many`` rows (one array per job, its
    per-job values in column order), which ``jsonb_array_elements`` splits into rows in order.
    One job (not ``many``) is ``INSERT ... VALUES``, every value a parameter. Parameters, in
    order: the shared values, the document (``many``), then with ``notify`` the channel, for
    ``pg_notify(channel, queue)`` per row (PostgreSQL delivers each distinct queue once, at
    commit).
    """
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    pk = quote(model._meta.pk.column)
    if connection.vendor == "mysql":  # without NOTIFY
        return sql_mariadb.insert_jobs(table, pk, [quote(name) for name, *_ in columns], columns,
                                       many=many)
    names = ", ".join(quote(name) for name, *_ in columns)
    if not many:
        # VALUES gives each parameter the type of its column.
        rows = f"VALUES ({', '.join(['%s'] * len(columns))})"
    else:
        select, position = [], 0
        for _, shared, is_json, sql_type in columns:
            if shared:
                select.append(f"%s::{sql_type}")
                continue
            if is_json:  # JSON null is SQL NULL, as the ORM stores None
                select.append(f"NULLIF(job.value -> {position}, 'null')")
            else:
                select.append(f"(job.value ->> {position})::{sql_type}")
            position += 1
        rows = (
            f"SELECT {', '.join(select)} "  # noqa: S608 - names only; values are parameters
            "FROM jsonb_array_elements(%s::jsonb) AS job(value)"
        )
    insert = f"INSERT INTO {table} ({names}) {rows}"  # noqa: S608 - names only
    if not notify:
        return f"{insert} RETURNING {pk}"
    queue = quote(model._meta.get_field("queue").column)
    return (
        f"WITH inserted AS ({insert} RETURNING {pk}, {queue}) "  # noqa: S608 - names only
        f"SELECT {pk}, pg_notify(%s, {queue}) FROM inserted"
    )


def notify() -> str:
    """NOTIFY, as a function so that channel and payload travel as the two parameters."""
    return "SELECT pg_notify(%s, %s)"


def listen(channel: str) -> str:
    """LISTEN on ``channel`` (a constant of ours: LISTEN takes no parameter)."""
    return f'LISTEN "{channel}"'


# ---- throughput and counts for the dashboard and manage.py stats -----------------------------

def add_throughput_counts(model, connection, rows: list) -> tuple[str, list]:
    """INSERT ``rows`` of ThroughputCount, each adding its count to the row of the same bucket
    if there is one (``ON CONFLICT ... DO UPDATE``, on PostgreSQL and SQLite): the rollup adds a
    few minutes of finished jobs to the hour they fall in. ``rows`` are ``(period_seconds,
    bucket_at, queue, task_name, status, count)``, no two with the same bucket; returns (SQL
    text, parameters). PostgreSQL gets them as one JSON document (a VALUES list of thousands of
    parameters costs psycopg more to send than the database to run); SQLite as a VALUES list,
    so give it at most a few thousand rows per statement."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    names = ("period_seconds", "bucket_at", "queue", "task_name", "status", "count")
    col = {name: quote(model._meta.get_field(name).column) for name in names}
    columns = ", ".join(col[name] for name in names)
    key = ", ".join(col[name] for name in names[:-1])
    count = col["count"]
    if connection.vendor == "mysql":
        fields = [model._meta.get_field(name) for name in names]
        return (sql_mariadb.add_throughput_counts(table, columns, count, len(rows)),
                _values_params(connection, fields, rows))
    upsert = f"ON CONFLICT ({key}) DO UPDATE SET {count} = {table}.{count} + excluded.{count}"
    if connection.vendor == "postgresql":
        document = json.dumps([
            {"p": period, "b": bucket_at.isoformat(), "q": queue, "t": task, "s": status,
             "n": n} for period, bucket_at, queue, task, status, n in rows])
        return (
            f"INSERT INTO {table} ({columns}) "  # noqa: S608 - names only
            "SELECT v.p, v.b, v.q, v.t, v.s, v.n FROM json_to_recordset(%s::json) "
            "AS v (p integer, b timestamptz, q text, t text, s text, n bigint) "
            f"{upsert}"
        ), [document]
    fields = [model._meta.get_field(name) for name in names]
    values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(rows))
    return (f"INSERT INTO {table} ({columns}) VALUES {values} {upsert}",  # noqa: S608
            _values_params(connection, fields, rows))


def repeatable_read(connection) -> str | None:
    """SQL text that makes the transaction just begun read one snapshot for all its statements
    (PostgreSQL; it must come before any query of the transaction), so that several reads
    agree; None where a transaction reads one snapshot anyway (SQLite)."""
    if connection.vendor in ("postgresql", "mysql"):
        # MariaDB: before the transaction's first statement, which is when it begins.
        return "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
    return None


def sampled_status_counts(model, connection) -> str:
    """PostgreSQL: ``(queue, status, due, rows, oldest run_at)`` of a sample of about a given
    percent of the job table's pages (``TABLESAMPLE SYSTEM``, which reads only those pages), for
    estimates of counts too dear to make exactly; ``due`` is ``run_at <= now``. Parameters: now,
    the percent, and the statuses to count (a list). Pages are sampled whole, so rare values may
    be missed and the estimate is rough."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    queue, status, run_at = (quote(model._meta.get_field(name).column)
                             for name in ("queue", "status", "run_at"))
    return (
        f"SELECT {queue}, {status}, {run_at} <= %s, COUNT(*), MIN({run_at}) "  # noqa: S608
        f"FROM {table} TABLESAMPLE SYSTEM (%s) WHERE {status} = ANY(%s) GROUP BY 1, 2, 3"
    )


#: PostgreSQL's row estimate of a table (kept up to date by autovacuum's ANALYZE; -1 until the
#: table was first analyzed). Parameter: the quoted table name.
TABLE_ROW_ESTIMATE = "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)"


#: On a PostgreSQL standby (no row on a primary): when the last transaction it replayed committed
#: on the primary, how long ago that is by the standby's clock, and how many seconds its replay
#: is behind what it has received (0 when it has replayed all of it: the usual lag formula, blind
#: to WAL not yet received, which the first two columns show). For READ_DATABASE.
REPLICA_STATE = (
    "SELECT pg_last_xact_replay_timestamp(), "
    "EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), "
    "CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
    "ELSE EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()) END "
    "WHERE pg_is_in_recovery()"
)


#: Whether an index is invalid: left behind by a ``CREATE INDEX CONCURRENTLY`` that did not finish
#: (PostgreSQL; no row when there is no such index). Parameter: the quoted index name.
INDEX_IS_INVALID = "SELECT NOT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)"


def explain_json(query_sql: str) -> str:
    """EXPLAIN (FORMAT JSON) of a query Django compiled (its parameters go with it)."""
    return "EXPLAIN (FORMAT JSON) " + query_sql


# ---- the job table's storage parameters (PostgreSQL) ---------------------------------------------
# Set by migration 0011 (Django's models cannot express storage parameters). Why these values:
# docs/performance.md#sustained-load-and-a-long-transaction (benchmarks/sustained_load.py). Each
# job leaves two dead row versions (claim, outcome) and a pruned one: at a few thousand jobs/s,
# PostgreSQL's default thresholds (20% of the table) and vacuum's default throttling
# (autovacuum_vacuum_cost_delay 2 ms) let dead rows pile up between and during vacuums. No
# fillfactor: the claim and the outcome change ``status``, which the partial indexes' conditions
# read, so neither update can be HOT whatever room the page has.

def job_table_storage_parameters() -> str:
    """Vacuum and analyze the job table after 1% of it changed (plus 1,000 rows), and unthrottled.
    Its reverse is ``reset_job_table_storage_parameters``."""
    return ("ALTER TABLE django_sqlqueue_job SET ("
            "autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, "
            "autovacuum_vacuum_insert_scale_factor = 0.01, "
            "autovacuum_vacuum_insert_threshold = 1000, "
            "autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 1000, "
            "autovacuum_vacuum_cost_delay = 0)")


def reset_job_table_storage_parameters() -> str:
    """Back to PostgreSQL's defaults (the server's settings): the reverse of
    ``job_table_storage_parameters``."""
    return ("ALTER TABLE django_sqlqueue_job RESET ("
            "autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, "
            "autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold, "
            "autovacuum_analyze_scale_factor, autovacuum_analyze_threshold, "
            "autovacuum_vacuum_cost_delay)")
