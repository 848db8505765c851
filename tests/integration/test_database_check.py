"""The database check (sqlqueue.E002): the jobs database of every pass is accepted; MariaDB
older than 10.6 (no SKIP LOCKED) and MySQL (untested) are refused with the reason."""

import re
import socket
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.db import OperationalError, connection, connections

from django_sqlqueue.checks import DATABASE_HINT, database_problem
from django_sqlqueue.db.mariadb.driver import server_problem as _mysql_problem


@pytest.mark.django_db
def test_the_jobs_database_of_this_pass_is_accepted(capsys):
    assert database_problem("default") is None
    call_command("check", databases=["default"])  # raises SystemCheckError on an error
    assert "sqlqueue.E002" not in capsys.readouterr().err


@pytest.mark.django_db
def test_the_database_checks_say_nothing_of_the_queues_models(capsys):
    """No warnings a user would have to silence: on MariaDB, Django's models.W036/W037 (no
    conditional unique constraints, no partial indexes) are answered by migration 0012. The
    migrations are applied (no sqlqueue.W002) and the suite's SQLite lacks IMMEDIATE, which
    tests/settings.py silences (sqlqueue.W004). Behind the PgBouncer pass's transaction pooler
    the workers poll instead of LISTENing: that one warning (sqlqueue.W001) is due there."""
    call_command("check", databases=["default"])
    err = capsys.readouterr().err
    pooled = connections["default"].settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
    assert "django_sqlqueue." not in err, err
    assert set(re.findall(r"sqlqueue\.W\d+", err)) == ({"sqlqueue.W001"} if pooled else set()), err


@pytest.mark.parametrize("version, mariadb, problem", [
    ((10, 5, 27), True, "MariaDB 10.5.27 lacks SELECT ... FOR UPDATE SKIP LOCKED (10.6+)"),
    ((8, 0, 36), False, "MySQL 8.0.36 is not supported (untested: only MariaDB 10.6+ is"),
])
def test_mariadb_before_10_6_and_mysql_are_refused_saying_why(version, mariadb, problem):
    server = SimpleNamespace(mysql_version=version, mysql_is_mariadb=mariadb)
    assert _mysql_problem(server).startswith(problem)
    assert "MariaDB 10.6" in DATABASE_HINT


@pytest.mark.django_db
def test_a_mariadb_session_not_in_utc_is_refused_naming_the_fix():
    """Jobs inserted by plain SQL take their times from CURRENT_TIMESTAMP, in the session's time
    zone; Django's are UTC."""
    if connection.vendor != "mysql":
        pytest.skip("MariaDB's session time zone; runs in the mariadb pass")
    with connection.cursor() as cursor:
        cursor.execute("SET time_zone = '+02:00'")
    try:
        problem = database_problem("default")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET time_zone = '+00:00'")
    assert "time zone is +2 h from UTC" in problem
    assert "SET time_zone = '+00:00'" in problem and "default_time_zone" in problem


def test_a_mariadb_server_out_of_reach_is_an_outage_not_a_problem_of_the_database(
        django_db_blocker):
    """A server that does not answer says nothing of what it is: the check raises the outage
    (which runworker's retry of the system checks waits out) instead of refusing the database
    (sqlqueue.E002, E104): a worker started during a MariaDB restart exited on E104 (found by
    tests/tasks_backend/test_kills.py)."""
    if connection.vendor != "mysql":
        pytest.skip("MariaDB's server check; runs in the mariadb pass")
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    connections.settings["unreachable"] = {**connection.settings_dict, "HOST": "127.0.0.1",
                                           "PORT": port}
    try:
        with django_db_blocker.unblock(), pytest.raises(OperationalError):
            _mysql_problem(connections["unreachable"])
    finally:
        del connections["unreachable"]
        del connections.settings["unreachable"]


@pytest.mark.django_db(transaction=True)
def test_the_migrations_check_agrees_with_djangos_migration_plan():
    """``migrations_problem`` lists this app's migration files without loading them: it must
    name what Django's own plan would apply, here with the last two recorded as unapplied."""
    from django.db.migrations.executor import MigrationExecutor
    from django.db.migrations.recorder import MigrationRecorder

    from django_sqlqueue.checks import migrations_problem

    assert migrations_problem("default") is None
    recorder = MigrationRecorder(connection)
    executor = MigrationExecutor(connection)
    leaf = next(key for key in executor.loader.graph.leaf_nodes() if key[0] == "django_sqlqueue")
    last_two = executor.loader.graph.forwards_plan(leaf)[-2:]
    for key in last_two:
        recorder.record_unapplied(*key)
    try:
        planned = [migration.name for migration, _ in MigrationExecutor(connection)
                   .migration_plan([leaf])]
        assert planned == [name for _, name in last_two]
        assert migrations_problem("default") == (
            f"the jobs database 'default' lacks 2 of django_sqlqueue's migrations "
            f"({planned[0]} to {planned[1]}): run `python manage.py migrate` first.")
    finally:
        for key in last_two:
            recorder.record_applied(*key)
