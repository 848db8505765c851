"""MariaDB's view of this app's tables (``db/table_health.py``): sizes and free space from
``information_schema.TABLES``, each index's size from InnoDB's persistent statistics, the
transactions open the longest and the purge backlog they cause (InnoDB's history list). InnoDB
purges dead row versions by itself, so no dead-row count is shown; the last two need the PROCESS
privilege, the index sizes SELECT on ``mysql.innodb_index_stats``: without them, the report
says which part it could not read."""

from django.db import DatabaseError

from ..table_health import DatabaseHealth, Holder, IndexState, TableState

TABLES = """
SELECT table_name, data_length, index_length, table_rows, data_free
FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name IN ({names})
"""

INDEXES = """
SELECT table_name, index_name, stat_value * @@innodb_page_size
FROM mysql.innodb_index_stats
WHERE database_name = DATABASE() AND stat_name = 'size' AND table_name IN ({names})
ORDER BY 3 DESC
"""

HOLDERS = """
SELECT trx_mysql_thread_id, TIMESTAMPDIFF(SECOND, trx_started, NOW()),
       CONCAT_WS(', ', trx_state, LEFT(trx_query, 120))
FROM information_schema.INNODB_TRX ORDER BY trx_started LIMIT 5
"""

HISTORY_LENGTH = ("SELECT `count` FROM information_schema.INNODB_METRICS "
                  "WHERE name = 'trx_rseg_history_len'")


def read(connection, tables: list) -> DatabaseHealth:
    marks = ", ".join(["%s"] * len(tables))
    health = DatabaseHealth(vendor="mariadb", tables=[])
    unreadable = []
    with connection.cursor() as cursor:
        cursor.execute(TABLES.format(names=marks), tables)
        states = {row[0]: TableState(name=row[0], bytes=row[1], index_bytes=row[2],
                                     live_rows=row[3], free_bytes=row[4])
                  for row in cursor.fetchall()}
        health.tables = list(states.values())
        rows = _optional(cursor, INDEXES.format(names=marks), tables, unreadable,
                         "index sizes (SELECT on mysql.innodb_index_stats)")
        for table, index, size in rows:
            if table in states:
                states[table].indexes.append(IndexState(name=index, table=table,
                                                        bytes=int(size)))
        rows = _optional(cursor, HOLDERS, [], unreadable, "open transactions (PROCESS)")
        health.holders = [Holder(kind="transaction", ident=str(thread), seconds=float(seconds),
                                 detail=detail or "") for thread, seconds, detail in rows]
        rows = _optional(cursor, HISTORY_LENGTH, [], unreadable,
                         "the purge backlog (PROCESS)")
        if rows:
            health.facts["history_list_length"] = int(rows[0][0])
    if unreadable:
        health.facts["unreadable"] = unreadable
    return health


def _optional(cursor, sql: str, params: list, unreadable: list, what: str) -> list:
    """The rows of ``sql``, or none (and ``what`` noted as unreadable) if this user may not
    read them."""
    try:
        cursor.execute(sql, params)
        return cursor.fetchall()
    except DatabaseError:
        unreadable.append(what)
        return []
