"""Migrations 0011 and 0024: the job table's autovacuum settings and fillfactor on PostgreSQL,
nothing elsewhere."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

APP = "django_sqlqueue"
#: What statements.job_table_storage_parameters sets (docs/performance.md explains the values).
AUTOVACUUM = {
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_vacuum_threshold": "1000",
    "autovacuum_vacuum_insert_scale_factor": "0.01",
    "autovacuum_vacuum_insert_threshold": "1000",
    "autovacuum_analyze_scale_factor": "0.02",
    "autovacuum_analyze_threshold": "1000",
    "autovacuum_vacuum_cost_delay": "0",
}
#: What statements.job_table_fillfactor sets (docs/performance.md#the-job-tables-fillfactor).
FILLFACTOR = {"fillfactor": "50"}
EXPECTED = {**AUTOVACUUM, **FILLFACTOR}


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


def _migration_names(topic):
    """(the migration before ours, the latest): ours is found by its topic, as its number may
    change when branches are merged."""
    loader = MigrationExecutor(connection).loader
    ours = next(name for app, name in loader.disk_migrations
                if app == APP and name.endswith(topic))
    parent = next(name for app, name in loader.get_migration(APP, ours).dependencies
                  if app == APP)
    return parent, loader.graph.leaf_nodes(APP)[0][1]


@pytest.mark.postgresql
@pytest.mark.parametrize(("topic", "before"), [
    ("_job_table_vacuum", {}),  # back to the server's defaults (and without 0024, after it)
    ("_job_table_fillfactor", AUTOVACUUM),  # only the fillfactor goes
])
def test_each_migration_sets_its_storage_parameters_and_its_reverse_resets_them(topic, before):
    assert _reloptions() == EXPECTED  # the test database was migrated
    parent, leaf = _migration_names(topic)
    try:
        _migrate_to(parent)
        assert _reloptions() == before
    finally:
        _migrate_to(leaf)
    assert _reloptions() == EXPECTED


@pytest.mark.parametrize("topic", ["_job_table_vacuum", "_job_table_fillfactor"])
def test_the_migrations_do_nothing_on_sqlite_either_way(topic):
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite pass")
    parent, leaf = _migration_names(topic)
    try:
        _migrate_to(parent)
    finally:
        _migrate_to(leaf)
    with connection.cursor() as cursor:  # the table is still there and usable
        cursor.execute("SELECT count(*) FROM django_sqlqueue_job")
        assert cursor.fetchone()[0] == 0
