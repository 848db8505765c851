"""What the package asks of a database, and the answers every database shares.

Each database the jobs table can live on has a driver, a subclass of :class:`DatabaseDriver`:
``postgresql.py``, ``sqlite.py`` and ``mariadb.py``. ``db.ops(connection)`` picks it once per
connection, as Django keeps ``connection.ops``: code elsewhere asks the driver (a capability
flag, a per-database rule, a row estimate) and never tests ``connection.vendor`` itself
(``tests/unit/test_vendor_branches.py`` holds that: such tests appear only under ``db/``).
"""

from contextlib import nullcontext

#: What ``document_value`` answers for a field whose per-job values the insert's JSON document
#: cannot carry on this database: the batch goes through ``bulk_create`` instead.
NOT_PLAIN = object()


class DatabaseDriver:
    """A database the jobs table is on, as the package sees it. The flags are class attributes,
    each with its one-line meaning; the methods' defaults are what a database without the
    feature does."""

    #: Django's name for the database (``connection.vendor``), for logs and the start banner.
    vendor = ""
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

    def __init__(self, connection):
        self.connection = connection

    # ---- the system checks ------------------------------------------------------------------

    def problem(self) -> str | None:
        """Why this database cannot hold the jobs table, or None if it can (``sqlqueue.E002``)."""
        return f"{self.connection.vendor} is not supported yet"

    # ---- inserting new jobs -----------------------------------------------------------------

    def pipeline(self, statements: int):
        """A context in which ``statements`` statements are sent without waiting for each
        other's results, where the database client can; else one that does nothing."""
        return nullcontext()

    def document_type(self, field) -> str:
        """The SQL type a per-job value of ``field`` is read as from the insert's document."""
        raise NotImplementedError(f"{type(self).__name__} inserts through bulk_create")

    def document_value(self, column):
        """How a per-job value of ``column`` (``enqueue/inserting._Column``) goes into the
        insert's document: a function of the value, None if it goes as it is, or NOT_PLAIN."""
        return column.to_plain

    # ---- row estimates ----------------------------------------------------------------------

    def table_row_estimate(self, model) -> float:
        """The planner's estimate of the rows in ``model``'s table; 0 where there is none, or
        before the table was first analyzed."""
        return 0

    def query_row_estimate(self, queryset) -> float:
        """The planner's estimate of the rows ``queryset`` selects."""
        raise NotImplementedError(f"{type(self).__name__} has no row estimates")


class UnsupportedDriver(DatabaseDriver):
    """A database the package does not run on: the system check says so (``problem``)."""
