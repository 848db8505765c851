"""PostgreSQL's driver: NOTIFY in the insert's statement, LISTEN, values in JSON documents, a
LATERAL join for limited queues, the planner's row estimates, statement timeouts, how current a
standby is; its own SQL text is in ``statements.py``."""

import functools
import json
import re
import sys
import weakref
from contextlib import contextmanager

from ...statuses import FINISHED_STATUSES
from .. import listening
from ..base import FINISHED_CHANNEL, DatabaseDriver
from ..pieces import NOW, NOW_PLUS, PARAM, outcome_row
from . import health, statements

_FINISHED = ", ".join(f"'{status.value}'" for status in FINISHED_STATUSES)

#: SQLSTATEs of a server going away besides class 08 (connection exception): admin_shutdown,
#: crash_shutdown, cannot_connect_now.
SERVER_GONE = frozenset({"57P01", "57P02", "57P03"})


class PostgreSQLDriver(DatabaseDriver):
    name = "postgresql"
    supports_notify = True
    inserts_from_document = True
    sends_plain_values = True
    estimates_rows = True
    builds_indexes_concurrently = True
    reports_replica_state = True
    json_object = "jsonb_build_object"

    def table_health(self, tables: list):
        return health.read(self.connection, tables)

    def problem(self) -> str | None:
        return None

    @staticmethod
    def says_connection_lost(error: BaseException) -> bool | None:
        if not type(error).__module__.startswith("psycopg"):
            return None
        sqlstate = getattr(error, "sqlstate", None)
        # No SQLSTATE: the client's own error (connection lost, closed, refused).
        return sqlstate is None or sqlstate.startswith("08") or sqlstate in SERVER_GONE

    @staticmethod
    def says_deadlock(error: BaseException) -> bool:
        return getattr(error, "sqlstate", None) == "40P01"

    def server_uptime(self, cursor) -> float:
        cursor.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp() - pg_postmaster_start_time())")
        return float(cursor.fetchone()[0])

    def now_sql(self, plus_seconds: bool = False, *, in_filter: bool = False) -> str:
        # clock_timestamp(), not now(): now() is the start of the transaction. As a scalar
        # subquery, read once per statement, when first needed (after the rows were locked), so
        # that every row of one claim gets the same time. In a filter, statement_timestamp():
        # the start of this statement, one value for every row, which an index can use.
        clock = "statement_timestamp()" if in_filter else "(SELECT clock_timestamp())"
        return f"({clock} + make_interval(secs => %s))" if plus_seconds else clock

    # ---- the claim --------------------------------------------------------------------------

    def ready_ids_by_key(self, model, *, queue: str, wanted: dict, now) -> tuple[str, list]:
        """One LATERAL join over the arrays of keys and counts: the text is the same for any
        number of keys (planning a UNION ALL of 100 parts cost more than running it)."""
        return (f"SELECT part.* FROM {self._by_key(model, db_clock=False, lock='')}",  # noqa: S608
                [list(wanted), list(wanted.values()), now, now, queue])

    def claimable_ids_by_key(self, model, *, queue: str, wanted: dict) -> tuple[str, list]:
        """The same LATERAL join, each key's rows locked ``FOR UPDATE SKIP LOCKED``."""
        col = self.columns(model, ("id",))
        return (f"SELECT part.{col['id']} FROM "  # noqa: S608 - names only
                f"{self._by_key(model, db_clock=True, lock=self.lock_clause())}",
                [list(wanted), list(wanted.values()), queue])

    def _by_key(self, model, *, db_clock: bool, lock: str) -> str:
        """The FROM of the reads by key: each wanted key's first rows, from its own range."""
        rows, _ = self._ready_key_rows(model, db_clock=db_clock)
        col = self.columns(model, ("id", "run_at", "priority", "concurrency_key"))
        # The key as a range of one value, and sorted by first: with "= wanted.k" the key's
        # order is implied, sqlqueue_job_ready serves the same order, and PostgreSQL sometimes
        # walked that one, filtering out a key's 100,000 rows to find another's. Only
        # sqlqueue_job_ready_by_key gives this order without a sort.
        key_range = (f">= wanted.k AND {col['concurrency_key']} <= wanted.k ORDER BY "
                     f"{col['concurrency_key']}, {col['priority']} DESC, {col['run_at']}, "
                     f"{col['id']} LIMIT wanted.n")
        return (f"unnest(%s::text[], %s::int[]) AS wanted(k, n) "  # noqa: S608 - names only
                f"CROSS JOIN LATERAL ({rows}{key_range}{lock}) AS part")

    def _claim_clock(self) -> tuple[str, str, dict, str]:
        # One reading of the clock for every row and column of the claim: NOW_PLUS is then
        # exactly NOW plus the seconds, and the caller can compute it instead of reading it
        # back. A materialised CTE is read once (a subquery in FROM would run again per row).
        values = {PARAM: "%s", NOW: "clock.now",
                  NOW_PLUS: "(clock.now + make_interval(secs => %s))"}
        return ("WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now) ", " FROM clock",
                values, "clock.now::text")

    def among_picked(self, column: str, picked_ids_sql: str) -> str:
        # Not ``IN (SELECT ...)``: PostgreSQL may plan that as a semi join whose inner side, the
        # pick, runs again for each row of the table it scans (a nested loop over a table its
        # statistics call tiny, with no Materialize between). Each run after the first skips
        # the rows this statement already set running (its own changes) and locks the next
        # ones, which then match too: a claim of LIMIT 1 set two of two ready jobs running in
        # CI (issue 44). ``ARRAY(SELECT ...)`` is an InitPlan, run once per statement; the rows
        # are then found by their primary key (``= ANY``), as the semi join found them.
        return f"{column} = ANY(ARRAY({picked_ids_sql}))"

    # ---- writes -----------------------------------------------------------------------------

    def _delete_jobs(self, model, picked_ids_sql: str, dependents: tuple) -> tuple[str, tuple]:
        quote, pk = self.connection.ops.quote_name, model._meta.pk.column
        others = [(quote(other._meta.db_table), quote(other._meta.get_field(name).column))
                  for other, name in dependents]  # all deleted here: none left
        return statements.delete_jobs(quote(model._meta.db_table), quote(pk), others,
                                      self.among_picked(quote(pk), picked_ids_sql)), ()

    def status_written(self, col: dict, job: str) -> str:
        """The status, and for a job someone waits for (``awaited``) that ended, its id sent
        on FINISHED_CHANNEL (delivered at commit; dropped on rollback). A job nobody waits for
        costs the read of a boolean it already has in hand: no NOTIFY, so no server-wide
        lock at commit (enqueue/notify.py). Measured on a 200-row batch of successes, 300 runs
        each, alternating: p50 2.84 ms without this CASE, 2.74 ms with it (noise)."""
        status = f"{job}{col['status']}"
        return (f"CASE WHEN {job}{col['awaited']} AND {status} IN ({_FINISHED}) "  # noqa: S608
                f"THEN (SELECT {status} FROM pg_notify('{FINISHED_CHANNEL}', "
                f"{job}{col['id']}::text)) ELSE {status} END")

    def record_outcomes(self, model, *, outcomes: list) -> tuple[str, list]:
        """The rows travel as one JSON document that ``json_to_recordset`` turns into typed
        columns: one parameter whatever the batch size, built by ``json.dumps`` in C."""
        table = self.connection.ops.quote_name(model._meta.db_table)
        col = self.columns(model, self.OUTCOME_FIELDS)
        value = {name: f"v.{name}" for name in ("id", "token", "status", "result", "errors",
                                                 "run_at", "finished_at")}
        if all(row.succeeded for row in outcomes):
            document = json.dumps([
                {"id": row.id, "token": str(row.token), "result": row.result,
                 "finished_at": row.finished_at.isoformat()}
                for row in outcomes
            ])
            return (
                f"UPDATE {table} AS job SET {self.success_sets(col, 'job.', value)}"  # noqa: S608
                "FROM json_to_recordset(%s::json) "
                "AS v (id bigint, token uuid, result jsonb, finished_at timestamptz) "
                f"{self.fenced(col, 'job.', value)}"
            ), [document]
        value.update(give_back="COALESCE(v.give_back, 0)",
                     interrupted="COALESCE(v.interrupted, 0)")
        document = json.dumps([outcome_row(row) for row in outcomes])
        return (
            f"UPDATE {table} AS job SET {self.outcome_sets(col, 'job.', value)}"  # noqa: S608
            "FROM json_to_recordset(%s::json) AS v (id bigint, token uuid, status text, "
            "result jsonb, errors jsonb, run_at timestamptz, finished_at timestamptz, "
            "give_back int, interrupted int) "
            f"{self.fenced(col, 'job.', value)}"
        ), [document]

    def _rescue_parts(self, col: dict, message: str, *, db_clock: bool) -> tuple:
        now = self.now_sql() if db_clock else "%s::timestamptz"
        at = "to_char(clock.now AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"
        entry = self.error_entry({
            "attempt": f"job.{col['attempts']}", "at": at, "type": "%s::text",
            "message": f"left({message}, %s)", "traceback": "''",
            "worker": f"COALESCE(job.{col['claimed_by']}, '')", "interrupted": "true"})
        errors = f"COALESCE(job.{col['errors']}, '[]'::jsonb) || jsonb_build_array({entry})"
        # RETURNING qualified: picked has the same columns.
        return now, errors, "IS NOT DISTINCT FROM", f"job.{col['id']}, job.{col['status']}"

    def statement_timeout(self, *, seconds: float) -> tuple | None:
        # SET LOCAL statement_timeout takes no parameter: its function does.
        return ("SELECT set_config('statement_timeout', %s, true)",
                [str(max(1, round(seconds * 1000)))])

    def bound_transaction(self, *, seconds: float) -> list:
        # Both SET LOCAL: they end with the transaction. An idle session past its limit is
        # closed by the server, which rolls the transaction back and frees its locks.
        ms = str(max(1, round(seconds * 1000)))
        return [("SELECT set_config('statement_timeout', %s, true), "
                 "set_config('idle_in_transaction_session_timeout', %s, true)", [ms, ms])]

    def repeatable_read(self) -> str | None:
        return "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"

    def insert_jobs(self, model, columns: tuple, *, notify: bool, many: bool) -> str:
        """The document's rows come from ``jsonb_array_elements``, in order. With ``notify``,
        ``pg_notify(channel, queue)`` per row (PostgreSQL delivers each distinct queue once, at
        commit)."""
        quote = self.connection.ops.quote_name
        table = quote(model._meta.db_table)
        pk = quote(model._meta.pk.column)
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

    def add_throughput_counts(self, model, rows: list) -> tuple[str, list]:
        """The rows as one JSON document (a VALUES list of thousands of parameters costs psycopg
        more to send than the database to run)."""
        table, columns, upsert = self._throughput_upsert(model)
        document = json.dumps([
            {"p": period, "b": bucket_at.isoformat(), "q": queue, "t": task, "s": status,
             "n": n} for period, bucket_at, queue, task, status, n in rows])
        return (
            f"INSERT INTO {table} ({columns}) "  # noqa: S608 - names only
            "SELECT v.p, v.b, v.q, v.t, v.s, v.n FROM json_to_recordset(%s::json) "
            "AS v (p integer, b timestamptz, q text, t text, s text, n bigint) "
            f"{upsert}"
        ), [document]

    # ---- reads for the dashboard, the admin and manage.py stats -----------------------------

    def sampled_status_counts(self, model, *, now, percent: float, statuses) -> tuple:
        """``(queue, status, due, rows, oldest run_at)`` of the jobs in ``statuses`` in a sample
        of about ``percent`` percent of the job table's pages (``TABLESAMPLE SYSTEM``, which
        reads only those pages), for estimates of counts too dear to make exactly; ``due`` is
        ``run_at <= now``; (sql, params). Pages are sampled whole, so rare values may be missed
        and the estimate is rough."""
        table = self.connection.ops.quote_name(model._meta.db_table)
        col = self.columns(model, ("queue", "status", "run_at"))
        queue, status, run_at = col["queue"], col["status"], col["run_at"]
        return (
            f"SELECT {queue}, {status}, {run_at} <= %s, COUNT(*), MIN({run_at}) "  # noqa: S608
            f"FROM {table} TABLESAMPLE SYSTEM (%s) WHERE {status} = ANY(%s) GROUP BY 1, 2, 3"
        ), [now, percent, [str(status) for status in statuses]]

    def table_row_estimate(self, model) -> float:
        with self.connection.cursor() as cursor:
            cursor.execute(statements.TABLE_ROW_ESTIMATE,
                           [self.connection.ops.quote_name(model._meta.db_table)])
            row = cursor.fetchone()
        return max(row[0], 0) if row else 0

    def replica_state(self) -> tuple | None:
        with self.connection.cursor() as cursor:
            return cursor.execute(statements.REPLICA_STATE, []).fetchone()

    def query_row_estimate(self, queryset) -> float:
        query_sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
        with self.connection.cursor() as cursor:
            cursor.execute(statements.explain_json(query_sql), params)
            plan = cursor.fetchone()[0]
        if isinstance(plan, str):
            plan = json.loads(plan)
        return plan[0]["Plan"]["Plan Rows"]

    # ---- notifications and the schema -------------------------------------------------------

    def notify(self, channel: str, payloads) -> None:
        with self.connection.cursor() as cursor:
            for payload in payloads:
                cursor.execute(statements.NOTIFY, [channel, payload])

    @contextmanager
    def listen(self, params: dict, channels):
        # Imported here: the package also serves SQLite-only installs, which have no psycopg.
        import psycopg

        with psycopg.connect(**params, autocommit=True) as connection:
            for channel in channels:
                connection.execute(statements.listen(channel))
            yield Listening(connection)

    def index_is_invalid(self, name: str) -> bool:
        with self.connection.cursor() as cursor:
            cursor.execute(statements.INDEX_IS_INVALID, [self.connection.ops.quote_name(name)])
            row = cursor.fetchone()
        return bool(row and row[0])

    def repeated_cursor(self):
        """A cursor whose statements are prepared on the server (psycopg's ``prepare=True``):
        each shape of the claim is parsed and planned once per connection. Measured on a
        worker woken from idle: the claim's round trip 1.7-2.0 ms as a new statement each time,
        1.3 prepared (planning alone took 0.31 ms of it). PostgreSQL plans the first runs
        with their values and keeps a generic plan only where it costs no more than those, so
        a claim of a table grown large is not held to a plan made when it was small.

        None behind a transaction pooler (``DISABLE_SERVER_SIDE_CURSORS``): it hands each
        statement to any server connection, where the prepared statement may not exist. A
        pooler the settings do not mark shows itself at the second claim (the statement is not
        on the server connection it got): that connection prepares nothing more, and the claim
        runs as a plain statement."""
        connection = self.connection
        if listening.behind_pooler(connection.alias):
            return None
        connection.ensure_connection()
        raw = connection.connection
        if raw in _NOT_PREPARING:
            return None
        if raw.prepare_threshold is None:
            # Django turns psycopg's preparing off (None), which refuses even prepare=True; a
            # threshold no statement reaches lets this cursor's statements alone be prepared
            # (Django's own cursors bind on the client, and never prepare).
            raw.prepare_threshold = sys.maxsize
        with connection.wrap_database_errors:
            cursor = _preparing_cursor_class()(raw)
        # As connection.cursor() wraps its cursors: the execute wrappers and query logging of
        # Django (and of tests) see the claim as they see every other statement.
        return connection._prepare_cursor(cursor)

    # ---- inserting new jobs -----------------------------------------------------------------

    def pipeline(self, statements: int):
        """psycopg's pipeline mode for more than one statement, where libpq supports it (one
        statement, like every ``enqueue()``, gains nothing from it)."""
        if statements < 2:
            return super().pipeline(statements)
        # Imported here: the package also serves SQLite-only installs, which have no psycopg.
        import psycopg

        if not psycopg.Pipeline.is_supported():
            return super().pipeline(statements)
        self.connection.ensure_connection()
        return self.connection.connection.pipeline()

    def document_type(self, field) -> str:
        """The column's type without length or precision (``varchar``, not ``varchar(255)``):
        a cast to ``varchar(255)`` would cut an over-long value, which must fail at the column."""
        return re.sub(r"\(\d+(,\s*\d+)?\)", "", field.cast_db_type(self.connection))


#: psycopg connections on which a prepared statement went missing (or its name was taken) on
#: the server: behind a pooler in transaction mode that the settings do not mark. Weak: a
#: connection that is closed and replaced tries again.
_NOT_PREPARING = weakref.WeakSet()


@functools.cache
def _preparing_cursor_class():
    """A psycopg cursor with server-side parameters that prepares every statement it runs.
    Made on first use: the package also serves SQLite-only installs, which have no psycopg."""
    import psycopg

    class PreparingCursor(psycopg.Cursor):
        def execute(self, query, params=None, *, prepare=None, binary=None):
            if self.connection in _NOT_PREPARING:
                return super().execute(query, params, prepare=False, binary=binary)
            try:
                return super().execute(query, params, prepare=True, binary=binary)
            except (psycopg.errors.InvalidSqlStatementName,
                    psycopg.errors.DuplicatePreparedStatement,
                    psycopg.errors.ProtocolViolation):
                # A pooler in transaction mode, unmarked: this statement's server connection
                # is not the one that prepared it (the name is missing there, or another
                # client's statement has it: "bind message supplies 6 parameters, but prepared
                # statement requires 5"). Prepare nothing more on this connection.
                if self.connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    raise
                _NOT_PREPARING.add(self.connection)
                return super().execute(query, params, prepare=False, binary=binary)
            except psycopg.errors.FeatureNotSupported:
                # "cached plan must not change result type": a column the statement returns
                # changed type since it was prepared (a migration while workers run). Outside
                # a transaction, drop every prepared statement (psycopg forgets its own at a
                # DEALLOCATE ALL) and run it once more; inside one, the error is the caller's.
                if self.connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    raise
                psycopg.Cursor(self.connection).execute("DEALLOCATE ALL")
                return super().execute(query, params, prepare=True, binary=binary)

    return PreparingCursor


class Listening:
    """A LISTEN connection (``PostgreSQLDriver.listen``)."""

    def __init__(self, connection):
        self._connection = connection

    def wait(self, timeout: float):
        """The notifications that arrive within ``timeout`` seconds, as (channel, payload)."""
        for note in self._connection.notifies(timeout=timeout):
            yield note.channel, note.payload
