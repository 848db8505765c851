"""SQLite's view of this app's tables (``db/table_health.py``): each table's and index's pages
(the ``dbstat`` table, where SQLite was built with it), the file's free pages, which only
``VACUUM`` returns, and the size of its write-ahead log. SQLite has no vacuum holding back
dead rows: a deleted row's space is reused at once."""

import os

from django.db import DatabaseError

from ..table_health import DatabaseHealth, IndexState, TableState

PAGES = """
SELECT m.tbl_name, m.name, m.type, SUM(s.pgsize)
FROM sqlite_master m JOIN dbstat s ON s.name = m.name
WHERE m.tbl_name IN ({names}) GROUP BY m.name ORDER BY 4 DESC
"""


def read(connection, tables: list) -> DatabaseHealth:
    health = DatabaseHealth(vendor="sqlite", tables=[])
    with connection.cursor() as cursor:
        page_size = _pragma(cursor, "PRAGMA page_size")
        health.facts["file_bytes"] = _pragma(cursor, "PRAGMA page_count") * page_size
        health.facts["free_bytes"] = _pragma(cursor, "PRAGMA freelist_count") * page_size
        states = {name: TableState(name=name, bytes=0, index_bytes=0) for name in tables}
        try:
            cursor.execute(PAGES.format(names=", ".join(["%s"] * len(tables))), tables)
            rows = cursor.fetchall()
        except DatabaseError:  # SQLite built without SQLITE_ENABLE_DBSTAT_VTAB
            health.facts["unreadable"] = ["sizes per table (SQLite without dbstat)"]
            rows = []
    for table, name, kind, size in rows:
        state = states[table]
        if kind == "table":
            state.bytes = size
        else:
            state.index_bytes += size
            state.indexes.append(IndexState(name=name, table=table, bytes=size))
    health.tables = list(states.values())
    path = str(connection.settings_dict["NAME"])
    wal = f"{path}-wal"
    if not path.startswith((":memory:", "file:")) and os.path.exists(wal):
        health.facts["wal_bytes"] = os.path.getsize(wal)
    return health


def _pragma(cursor, statement: str) -> int:
    cursor.execute(statement, [])
    return cursor.fetchone()[0]
