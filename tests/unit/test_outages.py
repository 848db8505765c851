"""outages.database_went_away: a job's database error is an interruption only where the
database went away, never for errors the server answered (a deadlock, a timeout, a missing
table) nor for errors that are not the database's."""

import pytest
from django.db import IntegrityError, InternalError, OperationalError

from django_sqlqueue.db import outages

psycopg = pytest.importorskip("psycopg")


def wrapped(driver_error, django_class=OperationalError):
    """The error as Django raises it: its own class, the driver's error as the cause."""
    try:
        try:
            raise driver_error
        except Exception as exc:
            raise django_class(*exc.args) from exc
    except Exception as exc:  # noqa: BLE001 - returned to the test
        return exc


@pytest.mark.parametrize("driver_error", [
    psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
    psycopg.errors.CannotConnectNow("the database system is shutting down"),
    psycopg.errors.ConnectionFailure("connection failure"),
    psycopg.OperationalError("server closed the connection unexpectedly"),  # no SQLSTATE
])
def test_postgresql_errors_that_say_the_server_went_away(driver_error):
    assert outages.database_went_away(wrapped(driver_error), "default") is True


def test_replies_out_of_step_with_the_client_are_a_lost_connection():
    """psycopg's own InternalError, with no SQLSTATE: its connection read more replies than it
    sent commands, as through PgBouncer when PostgreSQL restarted under a transaction (the
    job's thread failed, and the job waited for its lease, before)."""
    out_of_step = psycopg.InternalError("received 2 results from command 'BEGIN'")
    assert outages.database_went_away(wrapped(out_of_step, InternalError), "default") is True


@pytest.mark.parametrize("driver_error", [
    psycopg.errors.InternalError_("could not read block 7 in file base/1/2"),  # XX000
    psycopg.errors.DeadlockDetected("deadlock detected"),
    psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
    psycopg.errors.LockNotAvailable("could not obtain lock"),
])
def test_postgresql_errors_the_server_answered_are_failures(driver_error):
    assert outages.database_went_away(wrapped(driver_error), "default") is False
    assert outages.database_went_away(wrapped(driver_error, InternalError), "default") is False


def test_mariadb_codes():
    mysqldb = pytest.importorskip("MySQLdb")
    gone = wrapped(mysqldb.OperationalError(2006, "MySQL server has gone away"))
    timeout = wrapped(mysqldb.OperationalError(1205, "Lock wait timeout exceeded"))
    assert outages.database_went_away(gone, "default") is True
    assert outages.database_went_away(timeout, "default") is False


def test_a_job_that_wraps_the_error_is_still_read_through():
    try:
        try:
            raise wrapped(psycopg.errors.AdminShutdown("terminating connection"))
        except OperationalError as exc:
            raise RuntimeError("could not save the order") from exc
    except RuntimeError as exc:
        assert outages.database_went_away(exc, "default") is True


def test_errors_that_are_not_connection_errors_never_are():
    assert outages.database_went_away(ValueError("bad"), "default") is False
    assert outages.database_went_away(
        wrapped(psycopg.errors.UniqueViolation("duplicate key"), IntegrityError),
        "default") is False


@pytest.mark.django_db
def test_without_a_word_from_the_driver_a_working_connection_means_a_failure():
    from django.db import connection

    connection.ensure_connection()
    assert outages.database_went_away(OperationalError("database is locked"), "default") is False
    assert outages.reachable("default") is True
