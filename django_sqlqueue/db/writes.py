"""The statements that change rows besides the claim: the outcome write, the rescue, the leader's
election, a schedule's cursor, batch deletes, the throughput rollup, new jobs. Each method is the
statement as PostgreSQL and SQLite both say it, or the parts they share; a driver overrides what
its database says otherwise (MariaDB: ``mariadb/statements.py``)."""

from ..statuses import INTERRUPTION_FINAL, INTERRUPTION_RUNS_AGAIN, JobStatus
from .pieces import ERROR_ENTRY_KEYS, RUNNING_BY_ID, cancel_wins, runs_again


class WriteStatements:
    """Part of :class:`~django_sqlqueue.db.base.DatabaseDriver`: ``self.connection`` is the
    driver's connection, ``self.columns`` and ``self.now_sql`` its own."""

    # ---- a workflow's edges (transitions/settle.py) -------------------------------------------

    def resolve_edges(self, edge_model, *, parents: list, now) -> tuple[str, list]:
        """Mark the unresolved edges of ``parents`` (job ids) resolved at ``now``, each row
        locked in (child, id) order first, and return their ``(id, child_id, parent_id,
        run_anyway)``; (statement, params) for ``returning.fetch``. One statement where the
        database has ``UPDATE ... RETURNING`` (the lock and the change of a workflow's step are
        one round trip); MariaDB says it in steps."""
        table = self.connection.ops.quote_name(edge_model._meta.db_table)
        col = self.columns(edge_model, ("id", "child", "parent", "run_anyway", "resolved_at"))
        picked_sql = self._unresolved(table, col, len(parents))
        resolved_at = edge_model._meta.get_field("resolved_at").get_db_prep_value(
            now, self.connection)
        return self._resolve_edges(table, col, picked_sql), [resolved_at, *parents]

    def _resolve_edges(self, table: str, col: dict, picked_sql: str):
        """resolve_edges' statement: the time first, then the parents (``picked_sql``'s)."""
        return (f"UPDATE {table} SET {col['resolved_at']} = %s "  # noqa: S608 - names only
                f"WHERE {self.among_picked(col['id'], picked_sql)} "
                f"RETURNING {col['id']}, {col['child']}, {col['parent']}, {col['run_anyway']}")

    def _unresolved(self, table: str, col: dict, count: int) -> str:
        """SELECT the ids of the unresolved edges of ``count`` parents (parameters), locked
        ``FOR UPDATE`` in (child, id) order where the database locks rows."""
        lock = " FOR UPDATE" if self.connection.features.has_select_for_update else ""
        return (f"SELECT {col['id']} FROM {table} "  # noqa: S608 - names only
                f"WHERE {col['parent']} IN ({', '.join(['%s'] * count)}) "
                f"AND {col['resolved_at']} IS NULL "
                f"ORDER BY {col['child']}, {col['id']}{lock}")

    def lock_children(self, model, *, count: int) -> str:
        """SELECT ``(id, parents_pending, status, queue)`` of ``count`` jobs (parameters: their
        ids, sorted), locked ``FOR UPDATE`` in id order where the database locks rows: the
        children a parent's end resolves edges of, before their counts change (settle.py).
        Built once per count: a chain's step has one child."""
        return self.cached(("lock_children", model, count), self._lock_children, model, count)

    def _lock_children(self, model, count: int) -> str:
        table = self.connection.ops.quote_name(model._meta.db_table)
        col = self.columns(model, ("id", "parents_pending", "status", "queue"))
        lock = " FOR UPDATE" if self.connection.features.has_select_for_update else ""
        return (f"SELECT {col['id']}, {col['parents_pending']}, {col['status']}, "  # noqa: S608
                f"{col['queue']} FROM {table} WHERE {col['id']} IN ({', '.join(['%s'] * count)}) "
                f"ORDER BY {col['id']}{lock}")

    def release_children(self, model, *, count: int, release: bool) -> str:
        """UPDATE ``count`` jobs (parameters after the first: their ids): lower
        ``parents_pending`` by the first parameter and, with ``release``, queue them
        (settle.py, under the rows' locks)."""
        return self.cached(("release_children", model, count, release), self._release_children,
                           model, count, release)

    def _release_children(self, model, count: int, release: bool) -> str:
        table = self.connection.ops.quote_name(model._meta.db_table)
        col = self.columns(model, ("id", "parents_pending", "status"))
        sets = f"{col['parents_pending']} = {col['parents_pending']} - %s"
        if release:
            sets += f", {col['status']} = '{JobStatus.QUEUED.value}'"
        return (f"UPDATE {table} SET {sets} "  # noqa: S608 - names and a status only
                f"WHERE {col['id']} IN ({', '.join(['%s'] * count)})")

    def parent_results(self, model, edge_model) -> str:
        """SELECT the results of one job's parents (the parameter: the child's id), in their
        order: NULL for a parent that did not succeed, or was pruned (no foreign key: its edge
        stays). ``Job.parent_results``; built once."""
        return self.cached(("parent_results", model, edge_model), self._parent_results, model,
                           edge_model)

    def _parent_results(self, model, edge_model) -> str:
        quote = self.connection.ops.quote_name
        job = self.columns(model, ("id", "status", "result"))
        col = self.columns(edge_model, ("child", "parent", "position"))  # the edge's
        table = quote(edge_model._meta.db_table)
        succeeded = JobStatus.SUCCEEDED.value
        return (f"SELECT (SELECT parent.{job['result']} "  # noqa: S608 - names and a status
                f"FROM {quote(model._meta.db_table)} parent WHERE parent.{job['id']} = "
                f"edge.{col['parent']} AND parent.{job['status']} = '{succeeded}') "
                f"FROM {table} edge "
                f"WHERE edge.{col['child']} = %s ORDER BY edge.{col['position']}")

    # ---- the outcome write ------------------------------------------------------------------

    #: The job columns the outcome write names.
    OUTCOME_FIELDS = ("id", "claim_token", "status", "result", "errors", "run_at", "finished_at",
                      "lease_expires_at", "max_attempts", "cancel_requested_at", "interruptions",
                      "awaited")

    def record_outcomes(self, model, *, outcomes: list) -> tuple[str, list]:
        """Write the outcomes of many running jobs in one statement, each fenced; (sql, params).

        ``outcomes`` are ``pieces.OutcomeRow``: ``errors`` and ``run_at`` None leave the column
        as it is; ``give_back`` raises max_attempts by one, ``interrupted`` interruptions. Each
        one is written only while the job is still running under that claim
        token, and RETURNING lists the ids written, so the caller knows which claims were still
        valid, with the status written. A job whose cancel was asked for is written
        ``cancelled`` whatever the outcome (``cancel_wins``), finished now if the outcome had no
        finish time. A JSON null result is stored as SQL NULL, as the ORM stores None.
        """
        raise NotImplementedError

    def outcome_sets(self, col: dict, job: str, value: dict) -> str:
        """The SET list of record_outcomes, written once for the databases that say it in one
        UPDATE: ``job`` is how the statement names the job's row ("job." or the table and a
        dot), ``value[name]`` the SQL of the outcome's value of that name."""
        cancel = f"{job}{col['cancel_requested_at']}"
        return (
            f"{col['status']} = {cancel_wins(cancel, value['status'])}, "
            f"{col['result']} = {value['result']}, "
            f"{col['errors']} = COALESCE({value['errors']}, {job}{col['errors']}), "
            f"{col['run_at']} = COALESCE({value['run_at']}, {job}{col['run_at']}), "
            f"{col['finished_at']} = CASE WHEN {cancel} IS NULL THEN {value['finished_at']} "
            f"ELSE COALESCE({value['finished_at']}, {self.now_sql()}) END, "
            f"{col['lease_expires_at']} = NULL, "
            f"{col['max_attempts']} = {job}{col['max_attempts']} + {value['give_back']}, "
            f"{col['interruptions']} = {job}{col['interruptions']} + {value['interrupted']} "
        )

    def success_sets(self, col: dict, job: str, value: dict) -> str:
        """The SET list of record_outcomes for a batch of successes only, nearly every batch:
        status, result and finished_at (a job whose cancel was asked for ends cancelled, its
        result kept). Measured: the general statement cost PostgreSQL 10% more per job."""
        cancel = f"{job}{col['cancel_requested_at']}"
        succeeded = f"'{JobStatus.SUCCEEDED.value}'"
        return (f"{col['status']} = {cancel_wins(cancel, succeeded)}, "
                f"{col['result']} = {value['result']}, "
                f"{col['finished_at']} = {value['finished_at']}, {col['lease_expires_at']} = NULL ")

    def fenced(self, col: dict, job: str, value: dict) -> str:
        """record_outcomes' WHERE and RETURNING: the job still running under the outcome's claim
        token (found by id: ``RUNNING_BY_ID``); its id and the status written."""
        return (f"WHERE {job}{col['id']} = {value['id']} "
                f"AND {job}{col['claim_token']} = {value['token']} "
                f"AND {job}{col['status']} = {RUNNING_BY_ID} "
                f"RETURNING {job}{col['id']}, {self.status_written(col, job)}")

    def status_written(self, col: dict, job: str) -> str:
        """The status record_outcomes returns: the column as written. A driver that wakes
        waiters (PostgreSQL) sends NOTIFY from here for an awaited job that ended."""
        return f"{job}{col['status']}"

    def values_params(self, fields, rows) -> list:
        """The parameters of a ``VALUES`` list: each value as its field saves it (a field of
        None: the value as it is), NULL as NULL."""
        connection = self.connection
        return [
            value if value is None or field is None else field.get_db_prep_save(value, connection)
            for row in rows for field, value in zip(fields, row, strict=True)
        ]

    # ---- maintenance: the leader's term, the rescue, batch deletes --------------------------
    # Used by worker/maintenance/ and the queryset methods behind it (models/job_queryset.py:
    # rescue, delete_in_batches). Each statement is one short transaction's work.

    def elect_leader(self, model, worker_model, *, name: str, holder: str,
                     term_seconds: float) -> tuple:
        """Take or renew the leadership ``name`` for ``holder`` unless another holder's term is
        still running; (statement, params) whose rows give the holder only when it now leads
        (run it with ``returning.fetch``)."""
        return self._elect_leader(model, worker_model), [name, holder, float(term_seconds)]

    def _elect_leader(self, model, worker_model):
        """elect_leader's statement. Parameters, in order: the leadership's name, the holder,
        the term in seconds. One upsert
        by the database's clock: a vacant name is inserted; the holder's own term is renewed;
        another holder's term is taken over once it has run out, or, by a registered worker, at
        once when that holder has no worker row (a worker that exited cleanly or was reaped, or
        a caller that is not a worker). Two candidates at once: on PostgreSQL the second waits
        for the first's row and then finds a running term; on SQLite the write lock orders them
        the same way. ``elected_at`` keeps the start of the holder's reign.
        """
        quote = self.connection.ops.quote_name
        table = quote(model._meta.db_table)
        col = self.columns(model, ("name", "holder", "elected_at", "expires_at"))
        workers = quote(worker_model._meta.db_table)
        worker_name = quote(worker_model._meta.get_field("name").column)
        now, later = self.now_sql(), self.now_sql(plus_seconds=True)
        return (
            f"INSERT INTO {table} ({col['name']}, {col['holder']}, {col['elected_at']}, "  # noqa: S608
            f"{col['expires_at']}) VALUES (%s, %s, {now}, {later}) "
            f"ON CONFLICT ({col['name']}) DO UPDATE SET "
            f"{col['holder']} = excluded.{col['holder']}, "
            f"{col['elected_at']} = CASE WHEN {table}.{col['holder']} = excluded.{col['holder']} "
            f"THEN {table}.{col['elected_at']} ELSE excluded.{col['elected_at']} END, "
            f"{col['expires_at']} = excluded.{col['expires_at']} "
            f"WHERE {table}.{col['holder']} = excluded.{col['holder']} "
            f"OR {table}.{col['expires_at']} < excluded.{col['elected_at']} "
            f"OR ({table}.{col['holder']} NOT IN (SELECT {worker_name} FROM {workers}) "
            f"AND excluded.{col['holder']} IN (SELECT {worker_name} FROM {workers})) "
            f"RETURNING {col['holder']}"
        )

    #: The job columns the rescue names.
    RESCUE_FIELDS = ("id", "status", "attempts", "max_attempts", "run_at", "finished_at",
                     "lease_expires_at", "claim_token", "claimed_by", "errors",
                     "cancel_requested_at", "interruptions", "max_interruptions")

    def error_entry(self, values: dict) -> str:
        """An entry of a job's ``errors`` as SQL: ``values[key]`` (SQL text) for each key of
        ERROR_ENTRY_KEYS, in that order, in the database's JSON object."""
        pairs = ", ".join(f"'{key}', {values[key]}" for key in ERROR_ENTRY_KEYS)
        return f"{self.json_object}({pairs})"

    def rescue_jobs(self, model, *, picked_sql: str, picked_params, error_type: str,
                    reason: str, message_limit: int, now=None) -> tuple:
        """Give back the running jobs that ``picked_sql`` (with ``picked_params``) selects as
        interrupted by the loss of their worker, recording ``error_type`` and ``reason`` (the
        message cut at ``message_limit``); (statement, params) whose rows are (id, new status)
        of each job rescued (run it with ``returning.fetch``). "Now" is the database's clock
        unless ``now`` is given."""
        clock = [] if now is None else [self.connection.ops.adapt_datetimefield_value(now)]
        statement = self._rescue_jobs(model, picked_sql, db_clock=now is None)
        return statement, [*clock, *picked_params, error_type, reason, message_limit]

    def _rescue_jobs(self, model, picked_sql: str, *, db_clock: bool = True) -> str:
        """rescue_jobs' statement: in one UPDATE; SQL text whose RETURNING gives (id, new
        status) of each job rescued.

        ``picked_sql`` selects columns named ``id, claim_token, lease_expires_at`` (on
        PostgreSQL with ``FOR UPDATE SKIP LOCKED``). Parameters, in order: (without
        ``db_clock``: now,) those of ``picked_sql``, the error type, the reason, the longest
        message kept. A lost worker is not the job's failure: each job becomes ``queued`` and
        due now, its attempt given back (as ``outcomes.interruption`` writes it) and
        ``interruptions`` raised by one; once that reaches ``max_interruptions`` it becomes
        ``exhausted`` instead (``cancelled`` if its cancel was asked for), so that a job that
        kills its workers is not run forever. Either way the entry ``outcomes.interruption_entry``
        would append (``error_entry``, with ``"traceback": ""`` and ``"interrupted": true``).
        Fenced on the claim token and the lease as read, so a heartbeat that renewed the lease
        meanwhile wins (on PostgreSQL the picked rows are locked, on SQLite the statement runs
        under the write lock). MariaDB's fence is its lock step alone: ``picked_sql`` is read
        with the rows locked, so the values read stay the row's until the UPDATE; it does not
        compare values that ``picked_sql`` read some other way.
        """
        table = self.connection.ops.quote_name(model._meta.db_table)
        col = self.columns(model, self.RESCUE_FIELDS)
        message = (f"'worker ' || COALESCE(job.{col['claimed_by']}, '?') || ' was lost while "
                   f"running attempt ' || job.{col['attempts']} || ' (' || %s || "
                   f"'); interruption ' || (job.{col['interruptions']} + 1) || ' of ' || "
                   f"job.{col['max_interruptions']} || CASE WHEN {runs_again('job.', col)} "
                   f"THEN '{INTERRUPTION_RUNS_AGAIN}' ELSE '{INTERRUPTION_FINAL}' END")
        now, errors, same, returning = self._rescue_parts(col, message, db_clock=db_clock)
        # A job whose cancel was asked for ends cancelled: it must not run again.
        again = f"job.{col['cancel_requested_at']} IS NULL AND {runs_again('job.', col)}"
        given_up = cancel_wins(f"job.{col['cancel_requested_at']}",
                               f"'{JobStatus.EXHAUSTED.value}'")
        # picked is a materialised CTE: as a subquery joined in FROM, PostgreSQL may run it more
        # than once, and with SKIP LOCKED each run picks other rows (a LIMIT of 2 rescued 4).
        return (
            f"WITH clock AS (SELECT {now} AS now), "  # noqa: S608 - names and status constants
            f"picked AS MATERIALIZED ({picked_sql}) "
            f"UPDATE {table} AS job SET "
            f"{col['status']} = CASE WHEN {again} THEN '{JobStatus.QUEUED.value}' "
            f"ELSE {given_up} END, "
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

    def _rescue_parts(self, col: dict, message: str, *, db_clock: bool) -> tuple:
        """rescue_jobs' own words on this database: (the clock's SQL, the new errors, "the
        same value" as an operator, the RETURNING list)."""
        raise NotImplementedError

    def advance_schedule(self, model, *, schedule_id, cursor, version, next_run_at,
                         skipped: int, last_skipped_at) -> tuple:
        """Move the cursor of schedule ``schedule_id`` to ``next_run_at`` if it is still
        ``cursor`` at ``version`` (as the caller read them), counting ``skipped`` ticks, the
        latest at ``last_skipped_at`` (None keeps the column); (statement, params) whose rows
        give the schedule's id when it moved (run it with ``returning.fetch``)."""
        at = self.connection.ops.adapt_datetimefield_value
        return self._advance_schedule(model), [
            at(next_run_at), skipped, None if last_skipped_at is None else at(last_skipped_at),
            schedule_id, at(cursor), version]

    def _advance_schedule(self, model) -> str:
        """advance_schedule's statement; SQL text whose RETURNING gives the schedule's id when
        it moved.

        Parameters, in order: the new ``next_run_at``, the number of ticks skipped, the latest
        tick skipped (None keeps the column), then the schedule's id, its ``next_run_at`` and
        ``version`` as read. The row must also still be active (not paused, not retired).

        This is the one write that decides a tick: the caller enqueues the tick's job in the
        same transaction only when a row came back, so of any number of processes that read the
        same cursor, exactly one enqueues. On PostgreSQL the row is picked ``FOR UPDATE SKIP
        LOCKED``: a process that finds another one advancing it goes on at once instead of
        waiting for its commit. On SQLite the statement runs under the database's write lock,
        and as the transaction's first statement it takes that lock before reading anything.
        """
        table = self.connection.ops.quote_name(model._meta.db_table)
        col = self.columns(model, ("id", "next_run_at", "version", "paused_at", "retired_at",
                                   "skipped_ticks", "last_skipped_at"))
        return (
            f"UPDATE {table} SET {col['next_run_at']} = %s, "  # noqa: S608 - names only
            f"{col['skipped_ticks']} = {col['skipped_ticks']} + %s, "
            f"{col['last_skipped_at']} = COALESCE(%s, {col['last_skipped_at']}) "
            f"WHERE {col['id']} IN (SELECT {col['id']} FROM {table} WHERE {col['id']} = %s "
            f"AND {col['next_run_at']} = %s AND {col['version']} = %s "
            f"AND {col['paused_at']} IS NULL AND {col['retired_at']} IS NULL"
            f"{self.lock_clause()}) RETURNING {col['id']}"
        )

    def delete_jobs(self, model, *, picked_sql: str, picked_params, dependents=()) -> tuple:
        """DELETE the jobs whose ids ``picked_sql`` (with ``picked_params``) selects, in one
        statement: (sql, params, left), its rows their ids. ``dependents``: (model, name of its
        foreign key to the job) of rows that go with their job, deleted by the same statement
        where the database can (PostgreSQL); ``left`` holds those the caller must delete."""
        sql, left = self._delete_jobs(model, picked_sql, tuple(dependents))
        return sql, list(picked_params), left

    def _delete_jobs(self, model, picked_ids_sql: str, dependents: tuple) -> tuple[str, tuple]:
        quote = self.connection.ops.quote_name
        pk = quote(model._meta.pk.column)
        return (f"DELETE FROM {quote(model._meta.db_table)} "  # noqa: S608 - names only
                f"WHERE {pk} IN ({picked_ids_sql}) RETURNING {pk}", dependents)

    def statement_timeout(self, *, seconds: float) -> tuple | None:
        """(sql, params) that limits each later statement of the current transaction to
        ``seconds`` (at least a millisecond); None where the database has no such limit."""
        return None

    def bound_transaction(self, *, seconds: float) -> list:
        """[(sql, params), ...] that end the current transaction, from the database's side,
        once it has waited idle for ``seconds`` between statements or one statement ran that
        long: how a transactional lane (worker/transactional_lane.py) bounds the row locks it
        holds when a job hangs. Empty where the database has no such limit (SQLite: one writer,
        whose lock a hung job holds until it returns)."""
        return []

    def repeatable_read(self) -> str | None:
        """SQL text that makes the transaction just begun read one snapshot for all its
        statements (it must come before any query of the transaction), so that several reads
        agree; None where a transaction reads one snapshot anyway (SQLite)."""
        return None

    def take_write_lock(self, model) -> tuple | None:
        """(sql, params) that takes the database's write lock for the transaction just begun,
        where a transaction takes it only at its first write; None where writes lock rows as
        they go. For a transaction that reads, then writes (a workflow's cancel, retry or
        expiry reads which jobs are in workflows first)."""
        return None

    # ---- new jobs and the throughput rollup -------------------------------------------------

    def insert_jobs(self, model, columns: tuple, *, notify: bool, many: bool) -> str:
        """INSERT new jobs, returning their ids in insert order; returns the SQL text
        (``enqueue/inserting.py`` decides what goes where and why). ``columns`` are ``(name,
        shared, is_json, sql_type)``: a shared value is one parameter for every row; the others
        come from the JSON document of ``many`` rows (one array per job, its per-job values in
        column order). Parameters, in order: the shared values, the document (``many``), then
        with ``notify`` the channel. Only where ``inserts_from_document``."""
        raise NotImplementedError(f"{type(self).__name__} inserts through bulk_create")

    THROUGHPUT_FIELDS = ("period_seconds", "bucket_at", "queue", "task_name", "status", "count")

    def add_throughput_counts(self, model, rows: list) -> tuple[str, list]:
        """INSERT ``rows`` of ThroughputCount, each adding its count to the row of the same
        bucket if there is one: the rollup adds a few minutes of finished jobs to the hour they
        fall in. ``rows`` are ``(period_seconds, bucket_at, queue, task_name, status, count)``,
        no two with the same bucket; returns (SQL text, parameters). Here a VALUES list with
        ``ON CONFLICT ... DO UPDATE``, so give it at most a few thousand rows per statement."""
        table, columns, upsert = self._throughput_upsert(model)
        fields = [model._meta.get_field(name) for name in self.THROUGHPUT_FIELDS]
        values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(rows))
        return (f"INSERT INTO {table} ({columns}) VALUES {values} {upsert}",  # noqa: S608
                self.values_params(fields, rows))

    def _throughput_upsert(self, model) -> tuple[str, str, str]:
        """(the table, its columns, the ``ON CONFLICT`` clause that adds the counts)."""
        table = self.connection.ops.quote_name(model._meta.db_table)
        names = self.THROUGHPUT_FIELDS
        col = self.columns(model, names)
        columns = ", ".join(col[name] for name in names)
        key = ", ".join(col[name] for name in names[:-1])
        count = col["count"]
        upsert = (f"ON CONFLICT ({key}) DO UPDATE SET "
                  f"{count} = {table}.{count} + excluded.{count}")
        return table, columns, upsert
