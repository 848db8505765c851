"""The reads of the claim of paused, limited and fair queues (claim/limited.py, claim/fair.py):
the queues and the concurrency keys with ready rows, each found by a skip scan, and the first
ready rows of each key. Only a worker that finds a queue paused, limited or fair in the Queue
table runs these. Each is the statement as PostgreSQL and SQLite say it; a driver overrides what
its database says otherwise (PostgreSQL: one LATERAL join for the rows by key; MariaDB: the keys
by GROUP BY reads of bounded runs of the index; MariaDB and SQLite: lock_queue in two
statements, ``UpdateThenRead``)."""

from typing import NamedTuple

from .pieces import READY_LIST


class UpdateThenRead(NamedTuple):
    """An UPDATE of one row by a key, then the SELECT of its columns by the same key, each with
    the same parameters, in the caller's transaction (``returning.fetch``): no row if the
    UPDATE matched none."""

    update: str
    read: str

    def run(self, cursor, params) -> list:
        cursor.execute(self.update, params)
        if not cursor.rowcount:
            return []
        cursor.execute(self.read, params)
        return cursor.fetchall()


class KeyedReads:
    """Part of :class:`~django_sqlqueue.db.base.DatabaseDriver`: ``self.connection`` is the
    driver's connection; ``self.columns``, ``self.ready_prefix`` and ``self.ready_condition``
    its own."""

    def lock_queue(self, queue_model, *, name: str, fields: tuple) -> tuple:
        """The first statement of a limited or fair queue's claim: UPDATE the Queue row of
        ``name`` if it is not paused, its ``last_claim_at`` set by the database's clock, and
        return its ``fields`` (names); (statement, params) for ``returning.fetch``. The UPDATE
        takes the row lock (PostgreSQL) or the write lock (SQLite) that orders the queue's
        claims, and reads the row the previous claim left, in one round trip: the fair claim's
        turns are as long as its statements, and one fewer statement is one fewer wait while
        the queue's other claims queue behind it (benchmarks/fairness_pickup.py)."""
        table = self.connection.ops.quote_name(queue_model._meta.db_table)
        col = self.columns(queue_model, ("name", "paused_at", "last_claim_at", *fields))
        returned = ", ".join(col[name] for name in fields)
        return (f"UPDATE {table} SET {col['last_claim_at']} = {self.now_sql()} "  # noqa: S608
                f"WHERE {col['name']} = %s AND {col['paused_at']} IS NULL RETURNING {returned}",
                [name])

    def _update_then_read(self, queue_model, *, name: str, fields: tuple) -> tuple:
        """lock_queue as two statements (``UpdateThenRead``): the UPDATE, then a SELECT."""
        statement, params = KeyedReads.lock_queue(self, queue_model, name=name, fields=fields)
        update, _, returned = statement.partition(" RETURNING ")
        table = self.connection.ops.quote_name(queue_model._meta.db_table)
        col = self.columns(queue_model, ("name",))
        read = f"SELECT {returned} FROM {table} WHERE {col['name']} = %s"  # noqa: S608 - names
        return UpdateThenRead(update, read), params

    def ready_queues(self, model, *, limit: int) -> tuple:
        """SELECT the distinct queue names of ready rows, in name order, up to ``limit``;
        (sql, params). A skip scan: one probe of ``sqlqueue_job_ready`` per
        queue, however many rows each holds, where ``SELECT DISTINCT`` would read every ready
        row. Due or not (a queue found with only later jobs costs its claim one empty probe)."""
        return self._ready_distinct(model, "queue", ""), [limit]

    def ready_keys(self, model, *, queue: str, limit: int, unkeyed: bool = False,
                   after: str | None = None) -> tuple:
        """SELECT the distinct concurrency keys (not "", no key, unless ``unkeyed``; only those
        after the key ``after`` if given) of ``queue``'s ready rows, in key order, up to
        ``limit``; (sql, params). A skip scan of ``sqlqueue_job_ready_by_key``: one probe per
        key, so a key with a backlog of 100,000 jobs costs what a key with one costs."""
        condition = f"{self.columns(model, ('queue',))['queue']} = %s AND "
        if after is not None:
            text = self._ready_distinct(model, "concurrency_key", condition, after="%s")
            return text, [queue, after, queue, limit]
        text = self._ready_distinct(model, "concurrency_key", condition,
                                    after="" if unkeyed else "''")
        return text, [queue, queue, limit]

    def _ready_distinct(self, model, field: str, queue: str, after="") -> str:
        """The recursive skip scan of ready_queues and ready_keys: each step finds the smallest
        value above the previous one (``queue`` is the text of a leading condition, or ""; the
        first value is above ``after``, SQL text of a constant, or any non-NULL one)."""
        quote = self.connection.ops.quote_name
        table = quote(model._meta.db_table)
        column = quote(model._meta.get_field(field).column)
        status = quote(model._meta.get_field("status").column)
        ready = self.ready_prefix()
        probe = (f"SELECT {column} FROM {table} "  # noqa: S608 - names and status constants only
                 f"WHERE {ready}{queue}{status} IN ({READY_LIST}) AND {column} ")
        first = f"> {after}" if after else "IS NOT NULL"
        return (
            f"WITH RECURSIVE found(value) AS ("  # noqa: S608 - names only
            f"SELECT ({probe}{first} ORDER BY {column} LIMIT 1) "
            f"UNION ALL SELECT ({probe}> found.value ORDER BY {column} LIMIT 1) "
            f"FROM found WHERE found.value IS NOT NULL) "
            f"SELECT value FROM found WHERE value IS NOT NULL LIMIT %s"
        )

    def ready_ids_by_key(self, model, *, queue: str, wanted: dict, now) -> tuple[str, list]:
        """SELECT (id, the key asked for, priority, run_at) of the first ready rows of one
        queue's keys, each key's in claim order, at most ``wanted[key]`` of each (the key "" is
        the jobs without a key); returns (sql, params). The caller merges them in claim order.
        The key is the one asked for, as written in ``wanted``: under a case-insensitive
        collation (MariaDB's usual) the rows of "A" include those of "a".

        Each key's rows are read from its own range of ``sqlqueue_job_ready_by_key`` and the
        read stops after ``wanted[key]`` rows, so the rows of keys left out (those at their
        limit) are never read. Here a ``UNION ALL`` of one subquery per key (at most 500 parts);
        PostgreSQL says it as one LATERAL join.
        """
        rows, order = self._ready_key_rows(model)
        col = self.columns(model, ("id", "priority", "run_at"))
        parts = [f"SELECT part{n}.{col['id']}, %s, part{n}.{col['priority']}, "  # noqa: S608
                 f"part{n}.{col['run_at']} FROM ({rows}= %s{order}%s) AS part{n}"
                 for n in range(len(wanted))]
        params = [value for key, count in wanted.items()
                  for value in (key, now, now, queue, key, count)]
        return " UNION ALL ".join(parts), params

    def claimable_ids_by_key(self, model, *, queue: str, wanted: dict) -> tuple[str, list]:
        """SELECT the ids of the first ready rows of one queue's keys, each key's in claim
        order, at most ``wanted[key]`` of each, due by the database's clock and locked ``FOR
        UPDATE SKIP LOCKED`` where the database has it; (sql, params): the ids a fair claim
        sets running (``claim_jobs``'s ``picked_sql``, claim/fair.py). Each key's rows are read
        as ``ready_ids_by_key`` reads them, from its own index range; rows another claim holds
        are passed over, so claims of the same keys at the same time take different rows."""
        rows, order = self._ready_key_rows(model, db_clock=True)
        col = self.columns(model, ("id",))
        parts = [f"SELECT part{n}.{col['id']} FROM "  # noqa: S608 - names only
                 f"({rows}= %s{order}%s{self.lock_clause()}) AS part{n}"
                 for n in range(len(wanted))]
        params = [value for key, count in wanted.items() for value in (queue, key, count)]
        return " UNION ALL ".join(parts), params

    def _ready_key_rows(self, model, db_clock: bool = False) -> tuple[str, str]:
        """ready_ids_by_key's read of one key's rows, up to the key's test, and its order; due
        at a parameter (two of them), or by the database's clock with ``db_clock``."""
        table = self.connection.ops.quote_name(model._meta.db_table)
        col = self.columns(model, ("id", "status", "run_at", "expires_at", "queue", "priority",
                                   "concurrency_key"))
        columns = f"{col['id']}, {col['concurrency_key']}, {col['priority']}, {col['run_at']}"
        now = self.now_sql(in_filter=True) if db_clock else "%s"
        rows = (f"SELECT {columns} FROM {table} "  # noqa: S608 - names and status constants only
                f"WHERE {self.ready_condition(col, now)} "
                f"AND {col['queue']} = %s AND {col['concurrency_key']} ")  # then the key's test
        return rows, f" ORDER BY {col['priority']} DESC, {col['run_at']}, {col['id']} LIMIT "
