"""Upgrading a busy queue: the migrations that index the job table build the index CONCURRENTLY
on PostgreSQL (migration_operations.AddJobIndex), so writes go on while it is built, and a build
that was interrupted is finished by running the migration again."""

import threading

import pytest
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor

from tests.support.threads import start_thread
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgresql]

APP = "django_sqlqueue"
INDEX = "sqlqueue_job_finished"  # migration 0007's: every finished row, the biggest to build


def _migration(suffix):
    """(the migration whose name ends with ``suffix``, its parent, the latest): found by topic,
    as numbers may change when branches are merged."""
    loader = MigrationExecutor(connection).loader
    name = next(name for app, name in loader.disk_migrations
                if app == APP and name.endswith(suffix))
    parent = next(dep for app, dep in loader.get_migration(APP, name).dependencies if app == APP)
    return name, parent, loader.graph.leaf_nodes(APP)[0][1]


def _migrate_to(name):
    executor = MigrationExecutor(connection)
    executor.migrate([(APP, name)])


def _migrate_in_thread(name, errors):
    return start_thread(lambda: _migrate_to(name), errors)


def _new_connection():
    wrapper = connections.create_connection("default")
    wrapper.connect()
    return wrapper


def _wait_for_build_waiting(observer):
    """Wait until a CREATE INDEX of ours waits for a lock (for the open transaction)."""
    with observer.cursor() as cursor:

        def build_waiting():
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                           "AND query ILIKE %s", [f"%CREATE INDEX%{INDEX}%"])
            return cursor.fetchone()[0]

        def activity():
            cursor.execute("SELECT query, state, wait_event_type, wait_event "
                           "FROM pg_stat_activity")
            return f"pg_stat_activity: {cursor.fetchall()}"

        wait_until(build_waiting, what="the index build to wait for a lock", context=activity)


def _index_is_valid():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)",
                       [INDEX])
        row = cursor.fetchone()
    return row and row[0]


def test_writes_to_the_job_table_go_on_while_the_upgrade_builds_its_index():
    name, parent, leaf = _migration("_throughput")
    _migrate_to(parent)
    holder, writer, observer = _new_connection(), _new_connection(), _new_connection()
    errors = []
    try:
        # A transaction that wrote to the job table and is still open (a request in progress).
        holder.set_autocommit(False)
        with holder.cursor() as cursor:
            cursor.execute("DELETE FROM django_sqlqueue_job WHERE id < 0")
        migrating = _migrate_in_thread(name, errors)
        _wait_for_build_waiting(observer)
        # Meanwhile another writer: a plain CREATE INDEX would queue its table lock behind the
        # build's, and this write would wait for the open transaction too.
        with writer.cursor() as cursor:
            cursor.execute("SET lock_timeout = '5s'")
            cursor.execute("DELETE FROM django_sqlqueue_job WHERE id < 0")
        holder.commit()
        migrating.join(timeout=60)
        assert not migrating.is_alive() and not errors, errors
        assert _index_is_valid()
    finally:
        for wrapper in (holder, writer, observer):
            wrapper.close()
        _migrate_to(leaf)


def test_running_the_migration_again_finishes_an_interrupted_index_build():
    name, parent, leaf = _migration("_throughput")
    _migrate_to(parent)
    holder, observer = _new_connection(), _new_connection()
    try:
        # An interrupted concurrent build (here: cancelled while it waited) leaves an invalid
        # index of the same name behind.
        holder.set_autocommit(False)
        with holder.cursor() as cursor:
            cursor.execute("DELETE FROM django_sqlqueue_job WHERE id < 0")
        failed = []

        def build():
            builder = _new_connection()
            try:
                with builder.cursor() as cursor:
                    cursor.execute(f'CREATE INDEX CONCURRENTLY "{INDEX}" '
                                   'ON django_sqlqueue_job (finished_at)')
            except Exception as exc:  # noqa: BLE001 - expected: cancelled
                failed.append(exc)
            finally:
                builder.close()
        thread = threading.Thread(target=build)
        thread.start()
        _wait_for_build_waiting(observer)
        with observer.cursor() as cursor:
            cursor.execute("SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                           "WHERE query ILIKE %s AND pid <> pg_backend_pid()",
                           [f"%CREATE INDEX%{INDEX}%"])
        thread.join(timeout=30)
        holder.commit()
        assert failed, "the build was meant to be cancelled"
        assert _index_is_valid() is False  # the leftover

        _migrate_to(name)
        assert _index_is_valid()
    finally:
        for wrapper in (holder, observer):
            wrapper.close()
        _migrate_to(leaf)


def test_the_unique_slots_and_tags_migration_builds_every_index_concurrently():
    name, parent, leaf = _migration("_unique_slots_and_tags")
    _migrate_to(parent)
    statements = []

    def record(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    try:
        with connection.execute_wrapper(record):
            _migrate_to(name)
    finally:
        _migrate_to(leaf)
    builds = [sql for sql in statements if "INDEX" in sql and sql.lstrip().startswith("CREATE")]
    assert len(builds) == 3, statements  # the slots, the slot's unique index, the tags
    assert all("CONCURRENTLY" in sql for sql in builds), builds
    assert any(sql.startswith("CREATE UNIQUE INDEX CONCURRENTLY") for sql in builds), builds
