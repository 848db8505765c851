"""What differs between PostgreSQL and MariaDB in the benchmark drivers, in one place: the
harness's own connection, the commit probe, what settles a table before a drain, and the SQL
fragments the prefills are built from. Everything else (enqueues, workers, counts) is the same
code on both: each system's own API and Django's ORM.

A database is named by its URL: ``postgresql://...`` (psycopg 3) or ``mysql://...`` (mysqlclient,
Django's MariaDB driver); the vendor names are Django's (``connection.vendor``).
"""

from urllib.parse import unquote, urlsplit

POSTGRESQL, MYSQL = "postgresql", "mysql"


def vendor_of(dsn: str) -> str:
    scheme = urlsplit(dsn).scheme
    if scheme in ("postgresql", "postgres"):
        return POSTGRESQL
    if scheme in ("mysql", "mariadb"):
        return MYSQL
    raise ValueError(f"{dsn!r}: a benchmark database URL starts with postgresql:// or mysql://")


def django_database(dsn: str) -> dict:
    """``DATABASES["default"]`` for the URL: the engine is picked from its scheme
    (``sqlite:///path``: a SQLite file with the options docs/getting-started.md gives, for the
    single-system scripts that run on SQLite too, databases.py)."""
    url = urlsplit(dsn)
    if url.scheme == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": url.path,
                "OPTIONS": {"timeout": 20, "init_command": "PRAGMA journal_mode=WAL;",
                            "transaction_mode": "IMMEDIATE"}}
    if vendor_of(dsn) == MYSQL:
        return {
            "ENGINE": "django.db.backends.mysql",
            "NAME": url.path.lstrip("/"),
            "USER": unquote(url.username or "root"),
            "PASSWORD": unquote(url.password or ""),
            "HOST": url.hostname,
            "PORT": url.port,
            "OPTIONS": {"charset": "utf8mb4"},
        }
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": url.path.lstrip("/"),
        "USER": url.username or "postgres",
        "HOST": url.hostname,
        "PORT": url.port,
    }


# ---- the harness's own connection (counts, the commit probe) ----------------------------------
class _MySQLConnection:
    """mysqlclient's connection with psycopg's ``execute()`` shape (returns the cursor), so the
    harness reads both alike."""

    def __init__(self, dsn: str):
        import MySQLdb

        settings = django_database(dsn)
        self._conn = MySQLdb.connect(
            host=settings["HOST"], port=settings["PORT"] or 3306, user=settings["USER"],
            password=settings["PASSWORD"], database=settings["NAME"], charset="utf8mb4",
            autocommit=True,
        )

    def execute(self, statement: str, params=None):
        cursor = self._conn.cursor()
        cursor.execute(statement, params)
        return cursor

    def close(self):
        self._conn.close()


def connect(dsn: str):
    """An autocommit connection to the benchmark database, for the harness."""
    if vendor_of(dsn) == MYSQL:
        return _MySQLConnection(dsn)
    import psycopg

    return psycopg.connect(dsn, autocommit=True)


# ---- the commit probe: one tiny autocommit INSERT, the same for every system ------------------
PROBE_TABLE = {
    POSTGRESQL: "CREATE TABLE IF NOT EXISTS bench_probe (id bigserial PRIMARY KEY, at timestamptz)",
    MYSQL: "CREATE TABLE IF NOT EXISTS bench_probe (id bigint AUTO_INCREMENT PRIMARY KEY, "
           "at datetime(6)) ENGINE=InnoDB",
}
PROBE_INSERT = "INSERT INTO bench_probe (at) VALUES (now())"  # both


def settle(conn, vendor: str, checkpoint: bool = True) -> None:
    """Before a drain or a timed claim: fresh planner statistics, and (PostgreSQL, with
    ``checkpoint``) the prefill's dirty pages written out, so that no checkpoint falls in the
    measurement. InnoDB flushes in the background whatever we do; MariaDB's statistics are
    refreshed with ANALYZE TABLE."""
    if vendor == POSTGRESQL:
        conn.execute("VACUUM ANALYZE")
        if checkpoint:
            conn.execute("CHECKPOINT")
        return
    tables = [row[0] for row in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
        "AND table_type = 'BASE TABLE'").fetchall()]
    if tables:
        conn.execute("ANALYZE TABLE " + ", ".join(f"`{name}`" for name in tables)).fetchall()


# ---- the database's work per job: WAL and rows written (PostgreSQL) ---------------------------
# Rows from the system's own database's statistics; the WAL position is the cluster's, which only
# this system uses during its run (autovacuum's WAL included: it is part of the bill).
WRITE_COUNTERS = ("SELECT pg_current_wal_lsn()::text, coalesce(sum(n_tup_ins), 0), "
                  "coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0), "
                  "coalesce(sum(n_tup_del), 0) FROM pg_stat_user_tables")


#: Seconds until every idle backend has sent its row counts to the statistics (PostgreSQL 15
#: sends them at a commit at most once a second, else 10 s later if it is idle then).
STATS_SENT_WITHIN = 10.5


def write_counters(conn, vendor: str) -> tuple | None:
    """(WAL position, rows inserted, updated, updated HOT, deleted) so far; None on MariaDB.
    Waits first until the prefill's row counts are in the statistics (``STATS_SENT_WITHIN``):
    without it, a prefill that committed within a second of its connection's last report was
    counted in the drain (4 to 9.5 rows per job where the drain wrote 4). The workers' counts
    reach the statistics as they exit: take the second reading after they stopped."""
    if vendor != POSTGRESQL:
        return None
    import time

    time.sleep(STATS_SENT_WITHIN)
    return _counters(conn)


def _counters(conn) -> tuple:
    position, *rows = conn.execute(WRITE_COUNTERS).fetchone()
    return (position, *(int(n) for n in rows))  # sum() of bigint is a numeric: a Decimal


def work_per_job(conn, before: tuple | None, jobs: int) -> dict:
    """WAL bytes and rows written per job since ``before`` (``write_counters``), and the share
    of row updates that were heap-only (HOT: no index entry written)."""
    if before is None or not jobs:
        return {}
    after = _counters(conn)
    wal = conn.execute("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)",
                       (after[0], before[0])).fetchone()[0]
    inserted, updated, hot, deleted = (a - b for a, b in zip(after[1:], before[1:], strict=True))
    return {"wal_bytes_per_job": round(float(wal) / jobs),
            "rows_written_per_job": round((inserted + updated + deleted) / jobs, 2),
            "hot_update_share": round(hot / updated, 3) if updated else None}


# ---- fragments of the prefills' INSERT ... SELECT ---------------------------------------------
def numbers(vendor: str, n: int) -> str:
    """A FROM item with one column ``i``: 1 to ``n`` (PostgreSQL's generate_series, MariaDB's
    sequence engine; ``n`` is an int put into the text, as MariaDB's table name needs it)."""
    n = int(n)
    if vendor == MYSQL:
        return f"(SELECT seq AS i FROM seq_1_to_{n}) AS numbers"  # noqa: S608 - an int
    return f"generate_series(1, {n}) AS i"


def json_args(vendor: str, expression: str) -> str:
    """SQL building the payload ``{"args": [<expression>], "kwargs": {}}``."""
    if vendor == MYSQL:
        return f"JSON_OBJECT('args', JSON_ARRAY({expression}), 'kwargs', JSON_OBJECT())"
    return f"jsonb_build_object('args', jsonb_build_array({expression}), 'kwargs', '{{}}'::jsonb)"


def new_uuid(vendor: str) -> str:
    """SQL for a fresh random UUID."""
    return "UUID()" if vendor == MYSQL else "gen_random_uuid()"
