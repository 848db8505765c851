"""The health of this app's tables and what to do about it (``manage.py tablehealth``): the
database's report (``db/table_health.py``, read by its driver) and advice drawn from it, each
line naming the statement that mends what it found. Nothing here changes the database.

The thresholds are for a job table, where every job leaves dead row versions behind (its claim,
its outcome, its pruning): a few thousand dead rows are normal between two autovacuums, a
transaction open for minutes is not (vacuum can remove no row that died after it began)."""

import dataclasses
import threading
import time
from dataclasses import dataclass

from django.db import connections
from django.db import models as django_models

from .. import models
from ..db import ops
from ..db.table_health import DatabaseHealth

MIB = 1024 * 1024
#: Dead rows worth a VACUUM: at least this many, and a fifth of the live rows.
DEAD_ROWS = 10_000
DEAD_SHARE = 0.2
#: An index this much over its packed size, and at least this big, is worth rebuilding.
INDEX_BLOAT = 2.0
INDEX_BYTES = 8 * MIB
#: SQLite: free pages worth a VACUUM; a write-ahead log worth a checkpoint.
FREE_SHARE = 0.25
FREE_BYTES = 16 * MIB
WAL_BYTES = 64 * MIB
#: MariaDB: free space worth an OPTIMIZE TABLE; a purge backlog worth finding its transaction.
HISTORY_LENGTH = 1_000_000
#: The default of ``--max-transaction-seconds``.
TRANSACTION_SECONDS = 300


@dataclass
class Report:
    health: DatabaseHealth
    advice: list  # of str, each naming a statement to run; empty: nothing to do

    def as_json(self) -> dict:
        document = dataclasses.asdict(self.health)
        document["advice"] = self.advice
        return document


def tables() -> list:
    """This app's tables, the job table first."""
    job_table = models.Job._meta.db_table
    names = {model._meta.db_table for model in vars(models).values()
             if isinstance(model, type) and issubclass(model, django_models.Model)
             and model._meta.app_label == "django_sqlqueue" and not model._meta.abstract}
    return sorted(names, key=lambda name: (name != job_table, name))


def read(alias: str, *, transaction_seconds: float = TRANSACTION_SECONDS) -> Report | None:
    """The report of the database ``alias``; None where its driver has none."""
    names = tables()
    health = ops(connections[alias]).table_health(names)
    if health is None:
        return None
    health.tables.sort(key=lambda table: names.index(table.name))
    return Report(health, advice(health, transaction_seconds=transaction_seconds))


#: How long the dashboard's tile reuses a report: it refreshes every few seconds, and the
#: report is a few catalog reads that change slowly.
TILE_SECONDS = 60
_tiles: dict = {}  # alias -> (monotonic time, Report or None)
_tiles_lock = threading.Lock()


def recent(alias: str, *, max_age: float = TILE_SECONDS) -> Report | None:
    """``read(alias)``, read again only once ``max_age`` seconds have passed (the dashboard's
    tile: no catalog reads on most of its refreshes)."""
    with _tiles_lock:
        taken = _tiles.get(alias)
        if taken is not None and time.monotonic() - taken[0] < max_age:
            return taken[1]
    report = read(alias)
    with _tiles_lock:
        _tiles[alias] = (time.monotonic(), report)
    return report


def advice(health: DatabaseHealth, *, transaction_seconds: float) -> list:
    lines = [*_holders(health, transaction_seconds)]
    held = bool(lines)
    for table in health.tables:
        lines += _table(table, held)
    lines += _database(health)
    return lines


def _holders(health, transaction_seconds):
    for holder in health.holders:
        if holder.kind == "replication slot" and "inactive" in holder.detail:
            yield (f"Replication slot {holder.ident} is inactive and holds vacuum back: if "
                   f"nothing reads it any more, SELECT pg_drop_replication_slot('{holder.ident}').")
        elif holder.seconds is not None and holder.seconds >= transaction_seconds:
            how = {"session": f"SELECT pg_terminate_backend({holder.ident})",
                   "prepared transaction": f"ROLLBACK PREPARED '{holder.ident}'",
                   "transaction": f"KILL {holder.ident}"}.get(holder.kind, "end it")
            yield (f"{holder.kind.capitalize()} {holder.ident} has kept a transaction open for "
                   f"{holder.seconds:.0f} s ({holder.detail or 'no detail'}): dead rows cannot "
                   f"be removed until it ends. End it ({how}), or fix what leaves it open "
                   "(PostgreSQL's idle_in_transaction_session_timeout ends such sessions).")


def _table(table, held):
    dead, live = table.dead_rows or 0, table.live_rows or 0
    if dead >= DEAD_ROWS and dead >= DEAD_SHARE * live:
        after = " once the transaction above has ended" if held else ""
        yield (f"{table.name} has {dead:,} dead rows beside {live:,} live ones: "
               f"VACUUM (ANALYZE) {table.name}{after}.")
    for index in table.indexes:
        if index.bloat is not None and index.bloat >= INDEX_BLOAT and index.bytes >= INDEX_BYTES:
            yield (f"Index {index.name} takes {index.bytes / MIB:.0f} MiB, {index.bloat:.1f}x "
                   f"its packed size: REINDEX INDEX CONCURRENTLY {index.name} (no lock on "
                   "writes).")
    # Only MariaDB reports a table's free space (its data_free), and OPTIMIZE TABLE is its own.
    free, used = table.free_bytes or 0, table.bytes + table.index_bytes
    if free >= FREE_BYTES and free >= FREE_SHARE * used:
        yield (f"{table.name} has {free / MIB:.0f} MiB allocated and unused: OPTIMIZE TABLE "
               f"{table.name} (it rebuilds the table; run it when the queue is quiet).")


def _database(health):
    facts = health.facts
    free, size = facts.get("free_bytes", 0), facts.get("file_bytes", 0)
    if free >= FREE_BYTES and free >= FREE_SHARE * size:
        yield (f"The database file has {free / MIB:.0f} MiB of free pages of {size / MIB:.0f}: "
               "VACUUM returns them (it rewrites the file, and writers wait meanwhile).")
    if facts.get("wal_bytes", 0) >= WAL_BYTES:
        yield (f"The write-ahead log is {facts['wal_bytes'] / MIB:.0f} MiB: PRAGMA "
               "wal_checkpoint(TRUNCATE) (a reader that never lets go keeps it growing).")
    if facts.get("history_list_length", 0) >= HISTORY_LENGTH:
        # Advice text for the operator, not a statement this runs.
        yield (f"InnoDB has {facts['history_list_length']:,} row versions waiting for purge: "  # noqa: S608
               "a long transaction holds them (SELECT * FROM information_schema.INNODB_TRX "
               "ORDER BY trx_started names it).")
