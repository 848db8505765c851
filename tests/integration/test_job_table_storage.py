"""Migration 0011: the job table's autovacuum settings on PostgreSQL, nothing elsewhere."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

APP = "django_sqlqueue"
#: What sql.job_table_storage_parameters sets (docs/performance.md explains the values).
EXPECTED = {
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_vacuum_threshold": "1000",
    "autovacuum_vacuum_insert_scale_factor": "0.01",
    "autovacuum_vacuum_insert_threshold": "1000",
    "autovacuum_analyze_scale_factor": "0.02",
    "autovacuum_analyze_threshold": "1000",
    "autovacuum_vacuum_cost_delay": "0",
}


def _reloptions() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class "
                       "WHERE oid = 'django_sqlqueue_job'::regclass")
        options = cursor.fetchone()[0] or []
    return dict(option.split("=", 1) for option in options)


def _migrate_to(name):
    executor = MigrationExecutor(connection)
    executor.migrate([(APP, name)])
    executor.loader.build_graph()


def _migration_names():
    """(the migration before ours, the latest): ours is found by its topic, as its number may
    change when branches are merged."""
    loader = MigrationExecutor(connection).loader
    ours = next(name for app, name in loader.disk_migrations
                if app == APP and name.endswith("_job_table_vacuum"))
    parent = next(name for app, name in loader.get_migration(APP, ours).dependencies
                  if app == APP)
    return parent, loader.graph.leaf_nodes(APP)[0][1]


@pytest.mark.postgresql
def test_the_migration_sets_the_job_tables_autovacuum_settings_and_its_reverse_resets_them():
    assert _reloptions() == EXPECTED  # the test database was migrated
    parent, leaf = _migration_names()
    try:
        _migrate_to(parent)
        assert _reloptions() == {}  # back to the server's defaults
    finally:
        _migrate_to(leaf)
    assert _reloptions() == EXPECTED


def test_the_migration_does_nothing_on_sqlite_either_way():
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite pass")
    parent, leaf = _migration_names()
    try:
        _migrate_to(parent)
    finally:
        _migrate_to(leaf)
    with connection.cursor() as cursor:  # the table is still there and usable
        cursor.execute("SELECT count(*) FROM django_sqlqueue_job")
        assert cursor.fetchone()[0] == 0
