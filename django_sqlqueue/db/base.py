"""What the package asks of a database, and the answers the databases share.

Each database the jobs table can live on has a driver, a subclass of :class:`DatabaseDriver`,
in a package of its own: ``postgresql/``, ``sqlite/`` and ``mariadb/``, each a ``driver.py`` (the
class) and a ``statements.py`` (its own SQL text). ``db.ops(connection)`` picks it once per
connection, as Django keeps ``connection.ops``: code elsewhere asks the driver (a capability
flag, a per-database rule, a statement, NOTIFY and LISTEN) and never tests ``connection.vendor``
nor imports a driver's package (``tests/unit/test_vendor_branches.py`` holds both: only
``db/`` and the migrations do).

Every statement the ORM cannot say in one round trip is a method named for what it does, with a
docstring saying its parameters. Values always travel as query parameters; only column and table
names (quoted by the backend), the status constants of statuses.py and ``%s`` placeholders are
put into SQL text. The statements written here are those PostgreSQL and SQLite share (both have
partial indexes, ``UPDATE ... RETURNING`` and ``INSERT ... ON CONFLICT``); a driver overrides
what its database says otherwise, and MariaDB most of them (``mariadb/statements.py``).
"""

from contextlib import nullcontext

from .keyed_reads import KeyedReads
from .pieces import NOW, NOW_PLUS, PARAM, READY_LIST
from .writes import WriteStatements

#: Where the outcome write announces that an awaited job ended (payload: its id), for the
#: waiters' listener (waiting/listener.py), on a database that ``supports_notify``.
FINISHED_CHANNEL = "django_sqlqueue_finished"


class DatabaseDriver(KeyedReads, WriteStatements):
    """A database the jobs table is on, as the package sees it. The flags are class attributes,
    each with its one-line meaning; the methods' defaults are what a database without the
    feature does, or the statement as PostgreSQL and SQLite both say it."""

    #: Django's name for the database (its vendor), for logs and the start banner.
    name = ""
    #: LISTEN/NOTIFY wakes idle workers when jobs are enqueued (elsewhere they poll).
    supports_notify = False
    #: New jobs go in one statement of ours per batch, their differing values in a JSON
    #: document (``enqueue/inserting.py``); elsewhere through ``bulk_create``.
    inserts_from_document = False
    #: An insert's parameters travel as plain text and numbers, which the driver quotes far
    #: faster than the typed values fields save; elsewhere as each field saves them.
    sends_plain_values = False
    #: The planner's row estimates are cheap to read (``table_row_estimate``,
    #: ``query_row_estimate``); elsewhere counts are exact.
    estimates_rows = False
    #: An index can be built without blocking writes (``CREATE INDEX CONCURRENTLY``).
    builds_indexes_concurrently = False
    #: ``RETURNING`` gives a REAL column's value before its affinity applies (SQLite: 5, not
    #: the 5.0 a SELECT reads), so rows read back from a statement convert floats themselves.
    returns_values_before_affinity = False
    #: The database can say whether it is a standby and how current its data is
    #: (``replica_state``: SQLQUEUE["READ_DATABASE"]); elsewhere that is not measured.
    reports_replica_state = False
    #: The SQL function that builds a JSON object of keys and values (an ``errors`` entry).
    json_object = "json_object"

    def __init__(self, connection):
        self.connection = connection
        self.texts = {}  # SQL text by shape: the claim runs a few hundred times a second

    def cached(self, key, build, *args, **kwargs) -> str:
        """The SQL text ``build(*args, **kwargs)`` for ``key`` (or its text and parameters, for
        a statement whose parameters never change), built once per shape (bounded: the cache is
        emptied past 512 shapes)."""
        text = self.texts.get(key)
        if text is None:
            if len(self.texts) >= 512:
                self.texts.clear()
            text = self.texts[key] = build(*args, **kwargs)
        return text

    def columns(self, model, names) -> dict:
        """``{field name: its quoted column}`` of ``model``."""
        quote = self.connection.ops.quote_name
        return {name: quote(model._meta.get_field(name).column) for name in names}

    # ---- the system checks ------------------------------------------------------------------

    def problem(self) -> str | None:
        """Why this database cannot hold the jobs table, or None if it can (``sqlqueue.E002``)."""
        return f"{self.connection.vendor} is not supported yet"

    def missing_options(self) -> list:
        """The recommended ``OPTIONS`` its settings lack (``sqlqueue.W004``), each as the
        ``"key": value`` to add; read from the settings alone, without connecting."""
        return []

    # ---- the clock --------------------------------------------------------------------------
    # Leases, heartbeats and claim times are read off the database's clock, never a host's:
    # hosts' clocks disagree, and a claim may wait for a lock after Python read the time
    # (SQLite's write lock), so a lease computed before the wait could already be over.

    def now_sql(self, plus_seconds: bool = False, *, in_filter: bool = False) -> str:
        """SQL text for "now" by the database's clock, read when the statement gets to it (after
        any lock it waited for), as the column type stores it; with ``plus_seconds``, plus a
        number of seconds given as the next parameter. For text passed to ``cursor.execute``
        with params (a literal ``%`` doubled). ``in_filter``: for a WHERE condition, where
        PostgreSQL needs a value that is stable within the statement to use an index."""
        raise NotImplementedError

    def read_clock(self) -> str:
        """SELECT the database's "now", for Python code that needs it as a value (the scheduler
        decides which ticks are due by it). Execute with an empty parameter list."""
        return f"SELECT {self.now_sql()}"

    # ---- the claim --------------------------------------------------------------------------

    def ready_prefix(self) -> str:
        """SQL text put before the ready condition so that the ready indexes serve it: "" where
        partial indexes do."""
        return ""

    def ready_condition(self, col: dict, now: str) -> str:
        """The ready rows (the ready statuses, due at ``now``, SQL text, not expired): the
        condition of every read the claim makes."""
        return (f"{self.ready_prefix()}{col['status']} IN ({READY_LIST}) "
                f"AND {col['run_at']} <= {now} "
                f"AND ({col['expires_at']} IS NULL OR {col['expires_at']} > {now})")

    def ready_rows(self, rows):
        """``rows`` (a queryset of ready jobs by status) as the ready indexes can serve it."""
        return rows

    def unique_slot_rows(self, rows, slot: str):
        """The jobs of ``rows`` (a queryset) with unique slot ``slot``, as an index serves them:
        every job that holds it is among them (``job_table.holds_unique_slot`` tells which)."""
        return rows.filter(unique_slot=slot)

    def tagged_rows(self, rows, tags: tuple):
        """The jobs of ``rows`` (a queryset) that have every one of ``tags`` (strings). A JSON
        containment, which PostgreSQL's GIN index on tags serves (migration 0015)."""
        return rows.filter(tags__contains=list(tags))

    def lock_clause(self) -> str:
        """`` FOR UPDATE SKIP LOCKED`` where the database has it (SQLite has one writer)."""
        skip_locked = self.connection.features.has_select_for_update_skip_locked
        return " FOR UPDATE SKIP LOCKED" if skip_locked else ""

    def _ready_params(self, model, now, queues) -> tuple:
        """The parameters of the ready condition (now twice, unless the database's clock) and
        of the queue condition."""
        if now is None:
            return (*(queues or ()),)
        db_now = model._meta.get_field("run_at").get_db_prep_value(now, self.connection)
        return (db_now, db_now, *(queues or ()))

    def ready_ids(self, model, *, limit: int, queues=None, now=None) -> tuple:
        """The ids of the first ``limit`` ready jobs of ``queues`` (None: every queue) in claim
        order, due at ``now`` (None: the database's clock when the statement gets to the rows);
        (sql, params). Locked ``FOR UPDATE SKIP LOCKED`` where the database has it."""
        queue_count = None if queues is None else len(queues)
        text = self.cached(("ready_ids", model, queue_count, now is None), self._ready_ids,
                           model, queue_count=queue_count, db_clock=now is None)
        return text, [*self._ready_params(model, now, queues), limit]

    def ready_ids_after(self, model, *, after: tuple, limit: int, queues=None, now=None) -> tuple:
        """As ``ready_ids``, of the jobs after ``after``, a position in claim order
        ``(priority, run_at, id)``: the bounded claim's read; (sql, params)."""
        queue_count = None if queues is None else len(queues)
        text = self.cached(("ready_ids_after", model, queue_count, now is None),
                           self._ready_ids_after, model, queue_count=queue_count,
                           db_clock=now is None)
        ready = self._ready_params(model, now, queues)
        priority, run_at, pk = after
        run_at = model._meta.get_field("run_at").get_db_prep_value(run_at, self.connection)
        return text, [*ready, priority, run_at, pk, limit, *ready, priority, limit, limit]

    def _ready_ids(self, model, *, queue_count: int | None, db_clock: bool = True) -> str:
        """SELECT the ids of ready jobs in claim order, up to a limit; returns the SQL text.

        Parameters, in order: (without ``db_clock``: now, now,) the queue names (``queue_count``
        of them; ``None`` means every queue, with no queue condition), the limit. With
        ``db_clock`` "now" is the database's clock when the statement gets to the rows.

        This is ``Job.objects.ready(now).in_queues(...).order_by(*CLAIM_ORDER)[:limit]`` written
        out once, because compiling that queryset on every claim cost more than running it.
        With one queue the condition is ``queue = %s``, so the claim walks
        ``sqlqueue_job_ready``; with every queue it walks ``sqlqueue_job_ready_any_queue``.
        """
        col = self.columns(model, ("id", "status", "run_at", "expires_at", "queue", "priority"))
        now = self.now_sql(in_filter=True) if db_clock else "%s"
        queue = ""
        if queue_count == 1:
            queue = f" AND {col['queue']} = %s"
        elif queue_count:
            queue = f" AND {col['queue']} IN ({', '.join(['%s'] * queue_count)})"
        table = self.connection.ops.quote_name(model._meta.db_table)
        return (
            f"SELECT {col['id']} FROM {table} "  # noqa: S608 - names only
            f"WHERE {self.ready_condition(col, now)}{queue} "
            f"ORDER BY {col['priority']} DESC, {col['run_at']}, {col['id']} "
            f"LIMIT %s{self.lock_clause()}"
        )

    def _ready_ids_after(self, model, *, queue_count: int | None, db_clock: bool = True) -> str:
        """SELECT the ids of ready jobs that come after a position in claim order (a priority,
        a run_at and an id: the last job this worker claimed), in claim order, up to a limit;
        returns the SQL text. The bounded claim of claim/bounded.py.

        Parameters, in order: ``ready_ids``'s for the rest of the same priority, without the
        limit (now, now, the queues), then the position's priority, run_at and id, the limit;
        then ``ready_ids``'s again for the lower priorities, the position's priority, the limit;
        last the limit of the whole.

        Why not ``ready_ids`` with one more condition: behind a long transaction elsewhere, the
        ready index keeps an entry for every job claimed since it began, and they come first
        in claim order: ``ready_ids`` visits the table for each of them on every claim. Here
        each part starts its index scan at its bound, past them. Claim order is (priority DESC,
        run_at, id), so "after" is two index ranges: the same priority with (run_at, id) after
        the position (a row comparison, which starts the range), then every lower priority. A
        ``UNION ALL`` of two parts, each with its own ORDER BY, LIMIT and lock, starts both
        ranges, and its second part is not run when the first fills the limit.
        """
        col = self.columns(model, ("id", "run_at", "priority"))
        ready = self._ready_ids(model, queue_count=queue_count, db_clock=db_clock)
        head, order = ready.split(" ORDER BY ", 1)  # the ready conditions; order, limit, lock
        tail = order.split(" LIMIT ", 1)[1]  # "%s" and the lock
        same = (f"{head} AND {col['priority']} = %s "
                f"AND ({col['run_at']}, {col['id']}) > (%s, %s) "
                f"ORDER BY {col['run_at']}, {col['id']} LIMIT {tail}")
        lower = f"{head} AND {col['priority']} < %s ORDER BY {order}"
        return (
            f"SELECT {col['id']} FROM (SELECT {col['id']} FROM ({same}) AS same_priority "  # noqa: S608
            f"UNION ALL SELECT {col['id']} FROM ({lower}) AS lower_priority) AS bounded LIMIT %s"
        )

    def claim_jobs(self, model, *, picked_sql: str, picked_params, values: dict,
                   returning: tuple, lease_seconds: float | None = None) -> tuple:
        """Set the rows whose ids ``picked_sql`` (with ``picked_params``) selects running: each
        field of ``values`` to its value, one more attempt and, with ``lease_seconds``,
        ``claimed_at`` to the database's "now" and ``lease_expires_at`` to that plus
        ``lease_seconds``; (statement, params) whose rows are the fields of ``returning`` and,
        with ``lease_seconds``, last the claim time as text (run it with ``returning.fetch``).
        """
        assignments = tuple((name, PARAM) for name in values)
        clock = []
        if lease_seconds is not None:
            assignments += (("claimed_at", NOW), ("lease_expires_at", NOW_PLUS))
            clock = [float(lease_seconds)]
        statement = self.cached(("claim_jobs", model, assignments, returning, picked_sql),
                                self._claim_jobs, picked_sql, model, assignments, returning)
        get_field, connection = model._meta.get_field, self.connection
        params = [get_field(name).get_db_prep_save(value, connection)
                  for name, value in values.items()]
        return statement, [*params, *clock, *picked_params]

    def _claim_jobs(self, picked_ids_sql: str, model, assignments, returning) -> str:
        """UPDATE the picked rows and return the columns of ``returning`` (field names); returns
        the SQL text. ``assignments`` are ``(field name, PARAM | NOW | NOW_PLUS)``: their
        parameters, in that order, come before those of ``picked_ids_sql``. With NOW, each row
        also returns, last, the time set as text (the same for every row: the caller parses it
        once, not per row).

        ``picked_ids_sql`` selects the ids to claim; on PostgreSQL it ends in ``FOR UPDATE SKIP
        LOCKED``, so concurrent claimers each lock different rows and never wait for each other.
        On SQLite the single UPDATE statement runs under the database's write lock, and its
        WHERE re-reads the rows as they are then, so two claimers can never update the same row
        either. One statement is atomic on its own: it needs no surrounding transaction. NOW is
        read after the row is taken, so a claim never starts with a lease shortened by its
        wait. ``attempts`` is always incremented in SQL (not from a value read earlier). On
        MariaDB the statement is a ``Stepped`` (as are record_outcomes', rescue_jobs' and
        advance_schedule's): run it with ``returning.fetch``.
        """
        quote = self.connection.ops.quote_name
        clock, clock_from, values, now_column = self._claim_clock()
        sets, columns = self._claim_sets(model, assignments, values, returning)
        if any(how == NOW for _, how in assignments):
            columns += f", {now_column}"
        return (
            f"{clock}UPDATE {quote(model._meta.db_table)} "  # noqa: S608 - names only
            f"SET {', '.join(sets)}{clock_from} "
            f"WHERE {self.among_picked(quote(model._meta.pk.column), picked_ids_sql)} "
            f"RETURNING {columns}"
        )

    def among_picked(self, column: str, picked_ids_sql: str) -> str:
        """SQL text: ``column`` is one of the ids ``picked_ids_sql`` selects, that SELECT run
        once for the whole statement. A claim sets running exactly the rows its pick locked,
        never more than the pick's LIMIT (test_claim_limit.py). SQLite runs an uncorrelated
        ``IN`` subquery once, into a temporary index (MariaDB's claim is stepped: the ids are
        read first)."""
        return f"{column} IN ({picked_ids_sql})"

    def _claim_sets(self, model, assignments, values: dict, returning) -> tuple[list, str]:
        """claim_jobs' SET list (each assignment's SQL from ``values``, and one more attempt)
        and its returned columns."""
        quote = self.connection.ops.quote_name
        sets = [f"{quote(model._meta.get_field(name).column)} = {values[how]}"
                for name, how in assignments]
        attempts = quote(model._meta.get_field("attempts").column)
        sets.append(f"{attempts} = {attempts} + 1")
        columns = ", ".join(quote(model._meta.get_field(name).column) for name in returning)
        return sets, columns

    def _claim_clock(self) -> tuple[str, str, dict, str]:
        """claim_jobs' clock: (a leading CTE, its FROM, the SQL of PARAM, NOW and NOW_PLUS, the
        claim time returned as text). Here the clock is read in place."""
        values = {PARAM: "%s", NOW: self.now_sql(), NOW_PLUS: self.now_sql(plus_seconds=True)}
        return "", "", values, values[NOW]

    def repeated_cursor(self):
        """A cursor for a statement this connection runs again and again (the claim), whose
        text the server parses and plans once rather than on every run; None where there is
        none (the connection's own cursor serves)."""
        return None

    # ---- inserting new jobs -----------------------------------------------------------------

    def pipeline(self, statements: int):
        """A context in which ``statements`` statements are sent without waiting for each
        other's results, where the database client can; else one that does nothing."""
        return nullcontext()

    def document_type(self, field) -> str:
        """The SQL type a per-job value of ``field`` is read as from the insert's document."""
        raise NotImplementedError(f"{type(self).__name__} inserts through bulk_create")

    def document_value(self, column):
        """How a per-job value of ``column`` (``enqueue/columns.Column``) goes into the
        insert's document: a function of the value, None if it goes as it is, or NOT_PLAIN."""
        return column.to_plain

    # ---- notifications (NOTIFY, LISTEN) and the schema --------------------------------------
    # Only where ``supports_notify``: callers ask that flag first, and poll elsewhere.

    def notify(self, channel: str, payloads) -> None:
        """Send each of ``payloads`` (text) on ``channel`` (a name of ours) from this connection,
        in its transaction: delivered at the commit, dropped on a rollback."""
        raise NotImplementedError(f"{type(self).__name__} has no NOTIFY")

    def listen(self, params: dict, channels):
        """A context manager: a connection of its own, opened from ``params`` (the client's
        connect arguments, ``db/listening.listen_params``), that LISTENs on ``channels``
        (names of ours), as an object whose ``wait(timeout)`` gives the notifications that
        arrive within ``timeout`` seconds, as (channel, payload). A lost connection raises, from
        the ``with`` or from ``wait``. It never uses this driver's connection, so another thread
        may hold it."""
        raise NotImplementedError(f"{type(self).__name__} has no LISTEN")

    def index_is_invalid(self, name: str) -> bool:
        """Whether the index ``name`` is invalid, left by a concurrent build that did not finish
        (``builds_indexes_concurrently``); False where there is no such index."""
        return False

    # ---- outages ---------------------------------------------------------------------------

    @staticmethod
    def says_connection_lost(error: BaseException) -> bool | None:
        """Whether ``error``, an exception of this database's client library, says the
        connection is gone (the server went away, restarted, refused us); None where it is not
        this client's, or its error carries no code that tells (``db/outages.py``)."""
        return None

    @staticmethod
    def says_deadlock(error: BaseException) -> bool:
        """Whether ``error``, an exception of this database's client library, says the server
        rolled the transaction back as a deadlock's victim (``db/batches.py``,
        ``retrying_deadlocks``)."""
        return False

    def server_uptime(self, cursor) -> float | None:
        """Seconds the database server has surely been up (never more than have passed since it
        started), read with ``cursor``; None where there is no server (``db/outages.py``: a
        restart during a run is an outage, not counted)."""
        return None

    # ---- the tables' health -----------------------------------------------------------------

    def table_health(self, tables: list):
        """A ``table_health.DatabaseHealth`` of ``tables`` (their names); None where this
        database has no report (``manage.py tablehealth``)."""
        return None

    # ---- row estimates ----------------------------------------------------------------------

    def table_row_estimate(self, model) -> float:
        """The planner's estimate of the rows in ``model``'s table; 0 where there is none, or
        before the table was first analyzed."""
        return 0

    def query_row_estimate(self, queryset) -> float:
        """The planner's estimate of the rows ``queryset`` selects."""
        raise NotImplementedError(f"{type(self).__name__} has no row estimates")

    # ---- replicas ---------------------------------------------------------------------------

    def replica_state(self) -> tuple | None:
        """On a standby: (primary's commit time of the last transaction replayed, seconds since
        then by the standby's clock, seconds its replay is behind what it received); None on a
        primary, and where ``reports_replica_state`` is off."""
        return None


class UnsupportedDriver(DatabaseDriver):
    """A database the package does not run on: the system check says so (``problem``)."""
