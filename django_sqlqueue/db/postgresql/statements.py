"""PostgreSQL's SQL text of its own: the catalog reads (row estimates, index validity, how
current a standby is), NOTIFY and LISTEN, and the schema its migrations add (the job table's
storage parameters, migration 0011; the tags index, migration 0015). ``driver.py`` runs them.

Values always travel as query parameters; only our own constant names go into the text."""

import re

#: PostgreSQL's row estimate of a table (kept up to date by autovacuum's ANALYZE; -1 until the
#: table was first analyzed). Parameter: the quoted table name.
TABLE_ROW_ESTIMATE = "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)"

#: Whether an index is invalid: left behind by a ``CREATE INDEX CONCURRENTLY`` that did not
#: finish (no row when there is no such index). Parameter: the quoted index name.
INDEX_IS_INVALID = "SELECT NOT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)"

#: On a standby (no row on a primary): when the last transaction it replayed committed on the
#: primary, how long ago that is by the standby's clock, and how many seconds its replay is
#: behind what it has received (0 when it has replayed all of it: the usual lag formula, blind
#: to WAL not yet received, which the first two columns show). For READ_DATABASE.
REPLICA_STATE = (
    "SELECT pg_last_xact_replay_timestamp(), "
    "EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), "
    "CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
    "ELSE EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()) END "
    "WHERE pg_is_in_recovery()"
)

#: NOTIFY, as a function so that channel and payload travel as the two parameters.
NOTIFY = "SELECT pg_notify(%s, %s)"


def explain_json(query_sql: str) -> str:
    """EXPLAIN (FORMAT JSON) of a query Django compiled (its parameters go with it)."""
    return "EXPLAIN (FORMAT JSON) " + query_sql


def delete_jobs(table: str, pk: str, others: list, picked: str) -> str:
    """delete_jobs on PostgreSQL: the jobs that the condition ``picked`` selects, and the rows
    of ``others`` ((table, column) pairs) that point to them, in one statement of
    data-modifying CTEs, which all read its one snapshot. A prune's batch is one round trip,
    and no list of ids travels back as parameters: the ORM's deletes by a list of 1,000 ids
    cost the cleaner twice the database's own time per row (9.6 against 4.6 us, 2026-11-30),
    on a worker's GIL."""
    deletes = "".join(
        f", dependent_{number} AS (DELETE FROM {other} "  # noqa: S608 - names only
        f"WHERE {column} IN (SELECT {pk} FROM deleted))"
        for number, (other, column) in enumerate(others))
    return (f"WITH deleted AS (DELETE FROM {table} WHERE {picked} "  # noqa: S608 - names only
            f"RETURNING {pk}){deletes} SELECT {pk} FROM deleted")


def listen(channel: str) -> str:
    """LISTEN on ``channel``, a channel name of ours (LISTEN takes no parameter, so the name is
    checked before it goes into the text)."""
    if not re.fullmatch(r"[a-z_]+", channel):
        raise ValueError(f"a channel is one of the package's own names, not {channel!r}")
    return f'LISTEN "{channel}"'


# ---- the job table's storage parameters -----------------------------------------------------
# Set by migration 0011 (Django's models cannot express storage parameters). Why these values:
# docs/performance.md#sustained-load-and-a-long-transaction (benchmarks/sustained_load.py). Each
# job leaves two dead row versions (claim, outcome) and a pruned one: at a few thousand jobs/s,
# PostgreSQL's default thresholds (20% of the table) and vacuum's default throttling
# (autovacuum_vacuum_cost_delay 2 ms) let dead rows pile up between and during vacuums.

def job_table_storage_parameters() -> str:
    """Vacuum and analyze the job table after 1% of it changed (plus 1,000 rows), and
    unthrottled. Its reverse is ``reset_job_table_storage_parameters``."""
    return ("ALTER TABLE django_sqlqueue_job SET ("
            "autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, "
            "autovacuum_vacuum_insert_scale_factor = 0.01, "
            "autovacuum_vacuum_insert_threshold = 1000, "
            "autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 1000, "
            "autovacuum_vacuum_cost_delay = 0)")


def reset_job_table_storage_parameters() -> str:
    """Back to PostgreSQL's defaults (the server's settings): the reverse of
    ``job_table_storage_parameters``."""
    return ("ALTER TABLE django_sqlqueue_job RESET ("
            "autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, "
            "autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold, "
            "autovacuum_analyze_scale_factor, autovacuum_analyze_threshold, "
            "autovacuum_vacuum_cost_delay)")


#: The job table's fillfactor (migration 0024): inserts fill a page to half, leaving the other
#: half for the new row versions of the claim and the outcome. Neither update is heap-only (both
#: change ``status``, which the partial indexes' conditions read), but one that stays on its page
#: writes less WAL: no lock record of the old version before it moves (a second WAL record of each
#: update that leaves its page), and only the bytes that changed, PostgreSQL leaving out the
#: unchanged start and end of the row. The dead versions are then pruned in place, so the space is
#: used again instead of new pages. Measured (docs/performance.md#the-job-tables-fillfactor): WAL
#: per drained job 1,313 bytes at 100 (PostgreSQL's default), 1,033 at 50, 1,001 at 40, the same
#: drain rate, and a smaller table after the drain (1,472 pages against 1,821 for 20,000 jobs).
JOB_TABLE_FILLFACTOR = 50


def job_table_fillfactor() -> str:
    """Set ``JOB_TABLE_FILLFACTOR``: pages filled from now on keep that room (rows already
    written stay where they are). Its reverse is ``reset_job_table_fillfactor``."""
    return f"ALTER TABLE django_sqlqueue_job SET (fillfactor = {JOB_TABLE_FILLFACTOR})"


def reset_job_table_fillfactor() -> str:
    """Back to PostgreSQL's default fillfactor (100): the reverse of ``job_table_fillfactor``."""
    return "ALTER TABLE django_sqlqueue_job RESET (fillfactor)"


#: Migration 0015: the jobs with tags, by tag, for ``tags @> '["x"]'`` (``JobQuerySet.tagged``).
#: Partial, so a job without tags adds no entry: a plain insert costs what it did. Built
#: CONCURRENTLY: writes go on while it is built (migration_operations.py says why).
TAGS_INDEX = "sqlqueue_job_tags"


def add_tags_index() -> str:
    """Migration 0015 forwards (PostgreSQL only); ``jsonb_path_ops``: smaller and faster than
    the default GIN class, and containment (``@>``) is all the tag filter asks."""
    return (f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {TAGS_INDEX} ON django_sqlqueue_job "
            "USING gin (tags jsonb_path_ops) WHERE tags IS NOT NULL")


def drop_tags_index() -> str:
    """Migration 0015 backwards."""
    return f"DROP INDEX CONCURRENTLY IF EXISTS {TAGS_INDEX}"
