"""MariaDB 10.6+'s driver (Django's vendor ``"mysql"``; MySQL itself is refused by the system
check): no partial indexes and no ``UPDATE ... RETURNING``, so most statements are the steps of
``statements.py``; new jobs read from a JSON document by ``JSON_TABLE``; no NOTIFY (workers and
waiters poll). Here also its key scan of fair and limited queues (``KeysInReads``)."""

import functools
import json
import math
from typing import NamedTuple

from ..base import DatabaseDriver
from ..pieces import NOT_PLAIN, NOW, outcome_row
from . import health, statements

#: The type a per-job value of each field type is read as from MariaDB's ``JSON_TABLE``: wide
#: enough that a value reaches the column whole (an over-long one must fail at the column, not be
#: cut), and exact (a FloatField read as an integer would round). Other types (BooleanField,
#: UUIDField) are not put in MariaDB's document: their jobs go through bulk_create.
DOCUMENT_TYPES = {
    "JSONField": "JSON", "DateTimeField": "DATETIME(6)", "CharField": "LONGTEXT",
    "TextField": "LONGTEXT", "FloatField": "DOUBLE", "IntegerField": "BIGINT",
    "SmallIntegerField": "BIGINT", "BigIntegerField": "BIGINT", "PositiveIntegerField": "BIGINT",
    "PositiveSmallIntegerField": "BIGINT", "PositiveBigIntegerField": "BIGINT UNSIGNED",
}


#: SELECT how many seconds the session's time zone is ahead of UTC (0 when it is UTC), which
#: ``CURRENT_TIMESTAMP`` column defaults follow (the system check).
SESSION_UTC_OFFSET = "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())"

#: The client's and server's error codes of a server gone: can't connect (2002, 2003), server
#: has gone away (2006), lost connection (2013), server shutdown in progress (1053), connection
#: killed (1927).
SERVER_GONE = frozenset({2002, 2003, 2006, 2013, 1053, 1927})


class MariaDBDriver(DatabaseDriver):
    name = "mysql"
    inserts_from_document = True

    def table_health(self, tables: list):
        return health.read(self.connection, tables)

    def problem(self) -> str | None:
        return server_problem(self.connection)

    @staticmethod
    def says_connection_lost(error: BaseException) -> bool | None:
        if not type(error).__module__.startswith("MySQLdb"):
            return None
        code = error.args[0] if error.args else None
        return code in SERVER_GONE if isinstance(code, int) else None

    @staticmethod
    def says_deadlock(error: BaseException) -> bool:
        return type(error).__module__.startswith("MySQLdb") and error.args[:1] == (1213,)

    def server_uptime(self, cursor) -> float | None:
        # Uptime is whole seconds between two whole-second clock readings (the start's and now),
        # so it can read up to a second more than has passed: less one, it is never more.
        cursor.execute("SHOW GLOBAL STATUS LIKE 'Uptime'")
        row = cursor.fetchone()
        return max(float(row[1]) - 1.0, 0.0) if row else None

    def now_sql(self, plus_seconds: bool = False, *, in_filter: bool = False) -> str:
        return statements.now_sql(plus_seconds)

    # ---- the claim --------------------------------------------------------------------------

    def ready_prefix(self) -> str:
        """MariaDB's ready indexes lead with a generated column (migration 0012) that its
        optimizer does not derive from the status condition: the claim names it."""
        return f"{self.connection.ops.quote_name(statements.READY_COLUMN)} = 1 AND "

    def ready_keys(self, model, *, queue: str, limit: int, unkeyed: bool = False,
                   after: str | None = None) -> tuple:
        """Reads of ``sqlqueue_job_ready_by_key`` grouped by key, each of a bounded run of its
        entries (``KeysInReads``), instead of the recursive skip scan: MariaDB reads
        each of that scan's probes (``key > found.value``) from the start of the queue's range,
        so every probe crossed the entries of every key before it (5,000 jobs of one key: 5,000
        index entries read per later key). A statement to run with ``returning.fetch``."""
        quote = self.connection.ops.quote_name
        col = self.columns(model, ("queue", "concurrency_key"))
        first = "IS NOT NULL" if unkeyed else "> ''"
        params = [queue, after, limit] if after is not None else [queue, limit]
        return ready_keys(quote(model._meta.db_table), col, self.ready_prefix(),
                                     first), params

    def ready_rows(self, rows):
        return rows.extra(where=[statements.READY_CONDITION], params=[])  # noqa: S610

    def unique_slot_rows(self, rows, slot: str):
        """By the generated column of migration 0015 (the slot while held, else NULL): its
        unique index is the only index of slots."""
        return rows.extra(where=[statements.HELD_SLOT_CONDITION], params=[slot])  # noqa: S610

    def lock_queue(self, queue_model, *, name: str, fields: tuple):
        """No ``UPDATE ... RETURNING``: the UPDATE (the row lock), then a read of the row."""
        return self._update_then_read(queue_model, name=name, fields=fields)

    def _claim_jobs(self, picked_ids_sql: str, model, assignments, returning):
        quote = self.connection.ops.quote_name
        _, _, values, _ = self._claim_clock()
        sets, columns = self._claim_sets(model, assignments, values, returning)
        # The column set to NOW, read back as text like PostgreSQL's clock.now::text.
        claimed_at = next((quote(model._meta.get_field(name).column)
                           for name, how in assignments if how == NOW), None)
        return statements.claim_jobs(
            picked_ids_sql, quote(model._meta.db_table), quote(model._meta.pk.column), sets,
            sum(how != NOW for _, how in assignments), columns, claimed_at)

    # ---- writes -----------------------------------------------------------------------------

    def record_outcomes(self, model, *, outcomes: list):
        """Times as the column stores them (naive UTC text with USE_TZ). In id order: the lock
        step reads the document's rows in order and locks each job as it goes, and locks taken
        in another order than a concurrent UPDATE's (a heartbeat's, by id) deadlock."""
        table = self.connection.ops.quote_name(model._meta.db_table)
        col = self.columns(model, self.OUTCOME_FIELDS)
        to_db = self.connection.ops.adapt_datetimefield_value
        document = json.dumps([outcome_row(row, time_text=to_db)
                               for row in sorted(outcomes, key=lambda row: row.id)])
        return statements.record_outcomes(table, col), [document]

    def _resolve_edges(self, table: str, col: dict, picked_sql: str):
        return statements.resolve_edges(table, col, picked_sql)

    def _elect_leader(self, model, worker_model):
        quote = self.connection.ops.quote_name
        col = self.columns(model, ("name", "holder", "elected_at", "expires_at"))
        return statements.elect_leader(
            quote(model._meta.db_table), col, quote(worker_model._meta.db_table),
            quote(worker_model._meta.get_field("name").column))

    def _rescue_jobs(self, model, picked_sql: str, *, db_clock: bool = True):
        table = self.connection.ops.quote_name(model._meta.db_table)
        return statements.rescue_jobs(table, self.columns(model, self.RESCUE_FIELDS), picked_sql,
                                      db_clock=db_clock)

    def _advance_schedule(self, model):
        table = self.connection.ops.quote_name(model._meta.db_table)
        col = self.columns(model, ("id", "next_run_at", "version", "paused_at", "retired_at",
                                   "skipped_ticks", "last_skipped_at"))
        return statements.advance_schedule(table, col)

    def _delete_jobs(self, model, picked_ids_sql: str, dependents: tuple) -> tuple[str, tuple]:
        quote = self.connection.ops.quote_name
        return statements.delete_jobs(quote(model._meta.db_table), quote(model._meta.pk.column),
                                      picked_ids_sql), dependents

    def bound_transaction(self, *, seconds: float) -> list:
        # MariaDB has no SET LOCAL: the session's settings, on the lane's own connection, which
        # runs nothing else. Whole seconds; the server closes a transaction idle that long.
        whole = max(1, math.ceil(seconds))
        return [("SET SESSION idle_transaction_timeout = %s, max_statement_time = %s",
                 [whole, float(whole)])]

    def repeatable_read(self) -> str | None:
        # Before the transaction's first statement, which is when it begins.
        return "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"

    def insert_jobs(self, model, columns: tuple, *, notify: bool, many: bool) -> str:
        """Without NOTIFY: MariaDB has none."""
        quote = self.connection.ops.quote_name
        return statements.insert_jobs(
            quote(model._meta.db_table), quote(model._meta.pk.column),
            [quote(name) for name, *_ in columns], columns, many=many)

    def add_throughput_counts(self, model, rows: list) -> tuple[str, list]:
        table = self.connection.ops.quote_name(model._meta.db_table)
        col = self.columns(model, self.THROUGHPUT_FIELDS)
        columns = ", ".join(col[name] for name in self.THROUGHPUT_FIELDS)
        fields = [model._meta.get_field(name) for name in self.THROUGHPUT_FIELDS]
        return (statements.add_throughput_counts(table, columns, col["count"], len(rows)),
                self.values_params(fields, rows))

    # ---- inserting new jobs -----------------------------------------------------------------

    def document_type(self, field) -> str | None:
        """None for a type the document cannot carry (a UUID, such as a workflow's id): only a
        value shared by the whole batch, a parameter, is sent for it (``document_value``
        sends per-job values of such a type through bulk_create)."""
        return DOCUMENT_TYPES.get(field.get_internal_type())

    def document_value(self, column):
        """A time as the backend writes it (UTC, without an offset: its DATETIME has none), the
        other types of DOCUMENT_TYPES as PostgreSQL's, no others."""
        kind = column.field.get_internal_type()
        if kind not in DOCUMENT_TYPES:
            return NOT_PLAIN
        if kind == "DateTimeField":
            return functools.partial(column.field.get_db_prep_save, connection=self.connection)
        return column.to_plain


def server_problem(connection) -> str | None:
    """MariaDB 10.6+ is supported and tested; MySQL is not (no server to test it on)."""
    try:
        version = connection.mysql_version
    except Exception as exc:  # noqa: BLE001 - no server to ask: the check cannot say more
        if any(MariaDBDriver.says_connection_lost(error) for error in (exc, exc.__cause__)
               if error is not None):
            # Out of reach says nothing of what the server is: the outage goes to the caller,
            # as Django's own checks raise it (runworker retries them until it answers; a
            # worker started during a restart exited on this check's error instead).
            raise
        return f"its server version could not be read ({exc})"
    shown = ".".join(map(str, version))
    if not connection.mysql_is_mariadb:
        return (f"MySQL {shown} is not supported (untested: only MariaDB 10.6+ is, "
                "see docs/databases.md)")
    if version < (10, 6):
        return f"MariaDB {shown} lacks SELECT ... FOR UPDATE SKIP LOCKED (10.6+)"
    return _time_zone_problem(connection)


def _time_zone_problem(connection) -> str | None:
    """With USE_TZ, Django stores UTC, but the job table's column defaults (``db_default=Now()``:
    ``CURRENT_TIMESTAMP(6)``, for jobs inserted by plain SQL) are in the session's time zone,
    which Django leaves as the server's: it must be UTC, or such jobs run hours early or late."""
    from django.conf import settings

    if not settings.USE_TZ:
        return None
    with connection.cursor() as cursor:
        cursor.execute(SESSION_UTC_OFFSET, [])
        offset_seconds = cursor.fetchone()[0]
    if offset_seconds == 0:
        return None
    return (f"its session time zone is {offset_seconds / 3600:+g} h from UTC, so the job "
            "table's column defaults (jobs inserted by plain SQL) would not be UTC as Django's "
            "times are: set the server's default_time_zone to '+00:00', or add "
            "\"init_command\": \"SET time_zone = '+00:00'\" to the database's OPTIONS")


# ---- the key scan of fair and limited queues (docs/fairness.md#the-plans) ------------------

#: Ready index entries one read of ready_keys passes over at most, on MariaDB: a key with more
#: ready jobs costs this many entries, and the next read starts after it by a range of the index.
KEY_READ_ENTRIES = 2_000
#: The first read's entries; each read that finds several keys makes the next one 4 times as
#: long, up to KEY_READ_ENTRIES. A key alone with a backlog (a fair queue's usual busy state)
#: costs a read of this many entries, not of KEY_READ_ENTRIES: 0.46 ms instead of 1.15 ms a
#: scan behind 50,000 ready jobs of one key.
KEY_READ_FIRST = 64


class KeysInReads(NamedTuple):
    """ready_keys on MariaDB: the distinct keys of a queue's ready rows (``is_ready = 1`` alone,
    ``ready_prefix``: the status is not in the index, and testing it read each row from the
    table), in key order, up to a limit, from ``sqlqueue_job_ready_by_key`` alone. One read
    (``GROUP BY``) of the entries up to the limit-th key passed over every entry of the keys
    before it: each claim of a fair queue whose first key had 100,000 ready jobs read all of
    them (73 ms a claim, benchmarks/fair_claim_cost.py). Each read here takes the keys of the
    next KEY_READ_FIRST entries, then of up to 4 times as many after a read that found several
    keys, up to KEY_READ_ENTRIES; while a read was full, the next starts after its last key, by
    a range of the index that skips that key's other entries. So a key costs at most
    KEY_READ_ENTRIES entries, and a claim one read more per key with that many jobs.
    ``first``/``after`` read the first entries (the key's test SQL text, no parameter), or those
    after a key (one parameter); parameters: the queue, ``after``'s key if any, the limit."""

    first: str
    after: str

    def run(self, cursor, params) -> list:
        queue, *after, limit = params
        statement, bound, keys = (self.after if after else self.first), after, []
        size = KEY_READ_FIRST
        while True:
            cursor.execute(statement, [queue, *bound, size])
            rows = cursor.fetchall()
            keys += [key for key, _ in rows]
            if len(keys) >= limit or sum(entries for _, entries in rows) < size:
                return [(key,) for key in keys[:limit]]
            statement, bound = self.after, [keys[-1]]
            if len(rows) > 1:  # many keys with few jobs: longer reads, fewer round trips
                size = min(size * 4, KEY_READ_ENTRIES)


def ready_keys(table, col: dict, ready_prefix: str, first: str) -> KeysInReads:
    """KeysInReads of the keys that pass ``first`` (SQL text of the test with no parameter)."""
    key = col["concurrency_key"]

    def read(test):
        return (f"SELECT {key}, COUNT(*) FROM (SELECT {key} FROM {table} "  # noqa: S608 - names
                f"WHERE {ready_prefix}{col['queue']} = %s AND {key} {test} "
                f"ORDER BY {key} LIMIT %s) AS entries GROUP BY {key} ORDER BY {key}")

    return KeysInReads(first=read(first), after=read("> %s"))
