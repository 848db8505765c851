"""PostgreSQL's view of this app's tables (``db/table_health.py``): sizes and dead rows from
the statistics views, each index beside its packed size, and the oldest snapshots, slots and
prepared transactions that hold vacuum back. Other roles' sessions show only to a role with
``pg_read_all_stats`` (or a superuser)."""

import math

from ..table_health import DatabaseHealth, Holder, IndexState, TableState

#: Per table (parameter: the table names): its size, its indexes' size, live and dead rows,
#: the last vacuum and analyze (by hand or autovacuum).
TABLES = """
SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid), s.n_live_tup, s.n_dead_tup,
       GREATEST(s.last_vacuum, s.last_autovacuum), GREATEST(s.last_analyze, s.last_autoanalyze)
FROM unnest(%s::text[]) AS wanted(name)
JOIN pg_class c ON c.oid = to_regclass(wanted.name)
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
"""

#: Per index of those tables: its size, its entries (the last vacuum's or analyze's count; -1
#: before either) and the average width of its key columns (pg_stats; 8 bytes for an
#: expression, or a column not analyzed yet).
INDEXES = """
SELECT t.relname, i.relname, pg_relation_size(i.oid), i.reltuples,
       (SELECT COALESCE(sum(COALESCE(st.avg_width, 8)), 8)
        FROM unnest(x.indkey::smallint[]) AS key(attnum)
        LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = key.attnum
        LEFT JOIN pg_stats st ON st.schemaname = n.nspname AND st.tablename = t.relname
                              AND st.attname = a.attname)
FROM unnest(%s::text[]) AS wanted(name)
JOIN pg_index x ON x.indrelid = to_regclass(wanted.name)
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
ORDER BY 3 DESC
"""

#: What holds vacuum back, the oldest first: sessions with a snapshot or a transaction id
#: (idle in transaction included), replication slots, prepared transactions.
HOLDERS = """
SELECT kind, ident, seconds, detail FROM (
  SELECT 'session' AS kind, pid::text AS ident,
         EXTRACT(EPOCH FROM clock_timestamp() - xact_start)::float AS seconds,
         concat_ws(', ', state, NULLIF(application_name, ''), left(query, 120)) AS detail,
         GREATEST(age(backend_xmin), age(backend_xid)) AS xid_age
  FROM pg_stat_activity
  WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'
    AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
  UNION ALL
  SELECT 'replication slot', slot_name::text, NULL,
         concat_ws(', ', slot_type, CASE WHEN active THEN 'active' ELSE 'inactive' END),
         GREATEST(age(xmin), age(catalog_xmin))
  FROM pg_replication_slots WHERE xmin IS NOT NULL OR catalog_xmin IS NOT NULL
  UNION ALL
  SELECT 'prepared transaction', gid, EXTRACT(EPOCH FROM clock_timestamp() - prepared)::float,
         owner::text, age(transaction)
  FROM pg_prepared_xacts
) AS holders
ORDER BY xid_age DESC NULLS LAST
LIMIT 5
"""

PAGE = 8192
#: A B-tree leaf page's room for entries: the page less its header and special space, at the
#: default fillfactor of 90%.
LEAF_ROOM = (PAGE - 24 - 16) * 0.9


def read(connection, tables: list) -> DatabaseHealth:
    names = [connection.ops.quote_name(name) for name in tables]
    with connection.cursor() as cursor:
        cursor.execute(TABLES, [names])
        states = {row[0]: TableState(name=row[0], bytes=row[1], index_bytes=row[2],
                                     live_rows=row[3], dead_rows=row[4], last_vacuum=row[5],
                                     last_analyze=row[6]) for row in cursor.fetchall()}
        cursor.execute(INDEXES, [names])
        for table, index, size, entries, width in cursor.fetchall():
            states[table].indexes.append(
                IndexState(name=index, table=table, bytes=size,
                           packed_bytes=packed_size(entries, width)))
        cursor.execute(HOLDERS, [])
        holders = [Holder(kind=kind, ident=ident, seconds=seconds, detail=detail or "")
                   for kind, ident, seconds, detail in cursor.fetchall()]
    return DatabaseHealth(vendor="postgresql", tables=list(states.values()), holders=holders)


def packed_size(entries: float, key_width: float) -> int | None:
    """About what a B-tree of ``entries`` entries of keys ``key_width`` bytes wide takes when
    freshly built: each entry a tuple header (8 bytes) and a line pointer (4) beside its key
    aligned to 8, leaf pages filled to 90%, one metapage. None before the index was counted
    (never vacuumed nor analyzed)."""
    if entries < 0:
        return None
    entry = 12 + 8 * math.ceil(key_width / 8)
    leaves = math.ceil(entries / max(1, int(LEAF_ROOM // entry)))
    return (max(leaves, 1) + 1) * PAGE
