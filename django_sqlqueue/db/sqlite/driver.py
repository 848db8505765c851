"""SQLite 3.35+'s driver: one writer at a time, under its write lock (no ``SKIP LOCKED``
needed); times as text; ``UPDATE ... FROM (VALUES ...)``; new jobs through bulk_create; no
NOTIFY (workers and waiters poll). Its own SQL text is in ``statements.py``."""

import sqlite3

from django.conf import settings

from ..base import DatabaseDriver
from . import health, statements


class SQLiteDriver(DatabaseDriver):
    name = "sqlite"
    returns_values_before_affinity = True

    def lock_queue(self, queue_model, *, name: str, fields: tuple):
        """The UPDATE (the write lock), then a read of the row, as before ``lock_queue``: a
        statement here is a call into the library, not a round trip, so RETURNING saves little;
        and tests/process/test_fairness_workers.py, which already fails now and then on SQLite
        (1 run in 12 on main: a wave's enqueue waited up to 440 ms for the write lock while two
        workers claimed no-op jobs, the busy handler sleeping between tries), failed 3 runs in
        10 with ``UPDATE ... RETURNING`` (1 in 10 with the two statements)."""
        return self._update_then_read(queue_model, name=name, fields=fields)

    def tagged_rows(self, rows, tags: tuple):
        """SQLite has no JSON containment: a ``json_each`` look through each job's tags (no index
        serves it; filter by queue, task or time too on a big table)."""
        table = self.connection.ops.quote_name(rows.model._meta.db_table)
        column = self.connection.ops.quote_name(rows.model._meta.get_field("tags").column)
        has_tag = statements.has_tag(table, column)
        return rows.extra(where=[has_tag] * len(tags), params=list(tags))  # noqa: S610

    def table_health(self, tables: list):
        return health.read(self.connection, tables)

    def problem(self) -> str | None:
        if sqlite3.sqlite_version_info >= (3, 35):
            return None
        return f"SQLite {sqlite3.sqlite_version} lacks UPDATE ... RETURNING (3.35+)"

    def missing_options(self) -> list:
        """WAL (readers beside the writer), a timeout longer than Django's 5 s for the write
        lock, and IMMEDIATE transactions (a transaction that reads, then enqueues, would fail
        at once with "database is locked" while another process writes): docs/getting-started.md."""
        options = self.connection.settings_dict.get("OPTIONS") or {}
        init = "".join(str(options.get("init_command", "")).lower().split())
        missing = []
        if "journal_mode=wal" not in init:
            missing.append('"init_command": "PRAGMA journal_mode=WAL;"')
        if "timeout" not in options:
            missing.append('"timeout": 20')
        if str(options.get("transaction_mode", "")).upper() != "IMMEDIATE":
            missing.append('"transaction_mode": "IMMEDIATE"')
        return missing

    def now_sql(self, plus_seconds: bool = False, *, in_filter: bool = False) -> str:
        # Django stores UTC with USE_TZ, local time without it.
        return statements.now(plus_seconds=plus_seconds, local=not settings.USE_TZ)

    def take_write_lock(self, model) -> tuple | None:
        """A write that changes no row: the statement still takes the RESERVED lock, waiting
        for it as long as the busy timeout allows. A deferred transaction (Django's default,
        without ``transaction_mode: IMMEDIATE``) that read first and writes second fails at
        once with "database is locked" when another connection writes meanwhile: SQLite does
        not wait to upgrade a read lock."""
        pk = self.connection.ops.quote_name(model._meta.pk.column)
        table = self.connection.ops.quote_name(model._meta.db_table)
        return statements.take_write_lock(table, pk), []

    def record_outcomes(self, model, *, outcomes: list) -> tuple[str, list]:
        """``UPDATE ... FROM (VALUES ...)``, whose columns are column1, column2..."""
        table = self.connection.ops.quote_name(model._meta.db_table)
        col = self.columns(model, self.OUTCOME_FIELDS)
        job = f"{table}."
        if all(row.succeeded for row in outcomes):
            value = {"id": "v.column1", "token": "v.column2", "result": "v.column3",
                     "finished_at": "v.column4"}
            fields = [model._meta.get_field(name)
                      for name in ("id", "claim_token", "result", "finished_at")]
            params = self.values_params(fields, [
                (row.id, row.token, row.result, row.finished_at) for row in outcomes])
            values = ", ".join(["(%s, %s, %s, %s)"] * len(outcomes))
            return (f"UPDATE {table} SET {self.success_sets(col, job, value)}"  # noqa: S608
                    f"FROM (VALUES {values}) AS v {self.fenced(col, job, value)}"), params
        names = ("id", "token", "status", "result", "errors", "run_at", "finished_at",
                 "give_back", "interrupted")
        value = {name: f"v.column{number}" for number, name in enumerate(names, 1)}
        fields = [model._meta.get_field(name) for name in (
            "id", "claim_token", "status", "result", "errors", "run_at", "finished_at")]
        params = self.values_params([*fields, None, None], [
            (row.id, row.token, row.status, row.result, row.errors, row.run_at, row.finished_at,
             int(row.give_back), int(row.interrupted)) for row in outcomes])
        values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(outcomes))
        return (f"UPDATE {table} SET {self.outcome_sets(col, job, value)}"  # noqa: S608
                f"FROM (VALUES {values}) AS v {self.fenced(col, job, value)}"), params

    def _rescue_parts(self, col: dict, message: str, *, db_clock: bool) -> tuple:
        now = self.now_sql(in_filter=True) if db_clock else "%s"
        entry = self.error_entry({
            "attempt": f"job.{col['attempts']}", "at": "replace(clock.now, ' ', 'T') || '+00:00'",
            "type": "%s", "message": f"substr({message}, 1, %s)", "traceback": "''",
            "worker": f"COALESCE(job.{col['claimed_by']}, '')", "interrupted": "json('true')"})
        errors = f"json_insert(COALESCE(job.{col['errors']}, '[]'), '$[#]', {entry})"
        # SQLite's RETURNING takes no table alias.
        return now, errors, "IS", f"{col['id']}, {col['status']}"
