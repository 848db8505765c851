"""What a database says of the health of this app's tables, in one shape for every driver:
their size, their dead rows and when vacuum last ran, each index's size beside the size it would
have packed, and what holds vacuum back. Each driver's ``health.py`` reads it; the advice drawn
from it is ``observability/table_health.py``'s, the command ``manage.py tablehealth``."""

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class IndexState:
    name: str
    table: str
    bytes: int
    #: What the index would take freshly built from its current entries (PostgreSQL, once
    #: the table was analyzed); None where the database does not say.
    packed_bytes: int | None = None

    @property
    def bloat(self) -> float | None:
        """Its size over its packed size: 1.0 fresh, 2.0 twice what it needs."""
        return self.bytes / self.packed_bytes if self.packed_bytes else None


@dataclass
class TableState:
    name: str
    bytes: int  # the table's own storage, indexes apart
    index_bytes: int
    live_rows: int | None = None  # the database's estimate
    dead_rows: int | None = None  # row versions vacuum has not removed yet (PostgreSQL)
    free_bytes: int | None = None  # allocated and unused (MariaDB's data_free)
    last_vacuum: datetime | None = None  # by hand or by autovacuum, whichever was last
    last_analyze: datetime | None = None
    indexes: list = field(default_factory=list)  # of IndexState


@dataclass
class Holder:
    """Something that keeps vacuum (InnoDB's purge) from removing rows that died after it
    began: an open transaction, a replication slot, a prepared transaction."""

    kind: str  # "session", "replication slot", "prepared transaction", "transaction"
    ident: str  # its pid, slot name, gid or thread id
    seconds: float | None  # how long it has been open; None: the database does not say
    detail: str = ""  # its state, application and statement, as the database shows them


@dataclass
class DatabaseHealth:
    vendor: str
    tables: list  # of TableState
    holders: list = field(default_factory=list)  # of Holder, the oldest first
    #: Database-wide figures, by name: the file and its WAL (SQLite), the purge backlog
    #: (MariaDB); what could not be read, and why (a missing privilege), under "unreadable".
    facts: dict = field(default_factory=dict)
