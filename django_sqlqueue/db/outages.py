"""Telling an outage from a failure: whether a job's exception came from its database going away.

A job that raised because its database restarted, failed over or dropped its connection did not
fail: its run was interrupted, and it runs again without using an attempt (``runner.run`` makes
that an ``interrupted`` outcome; ``outcomes.interruption`` writes it). Two things must hold:

1. the exception is, or was caused by, a connection-class error (Django's ``OperationalError``
   or ``InterfaceError``), or an ``InternalError`` (psycopg raises one, with no SQLSTATE, when
   the replies it reads no longer match what it sent: "received 2 results from command
   'BEGIN'", through PgBouncer as PostgreSQL restarted under a transaction);
2. the database is gone: the driver's own error says so (PostgreSQL's SQLSTATE class 08 and
   57P01-57P03, "terminating connection due to administrator command" among them, or a psycopg
   error with no SQLSTATE, which the client raises when the connection is lost; MariaDB's client
   errors 2002/2003/2006/2013 and server errors 1053/1927), or, where the error says nothing
   either way (SQLite, other drivers), this thread's connection to the jobs database turns out
   broken, or a new one cannot be made.

Such an interruption is counted towards ``max_interruptions`` only when the job lost its own
connection while the server stayed up (``server_stayed_up``): it answers now (``reachable``),
and has not restarted since the run began. A server that restarted during the run was an outage
even if it answers again by the time the worker looks (the job's error handler took that long,
or PgBouncer held the check until the server was back).

A deadlock, a lock or statement timeout, a constraint violation or "no such table" are the job's
failures: the server answered them with a code of its own, and the connection still works.
"""

import time

from django.db import DatabaseError, InterfaceError, InternalError, OperationalError, connections

from . import DRIVERS, ops

#: Django's error classes a lost connection may raise; the driver's error, or a look at the
#: connection, then decides (an ``InternalError`` the server answered, PostgreSQL's XX000, is
#: the job's failure).
CONNECTION_ERRORS = (OperationalError, InterfaceError, InternalError)


def database_went_away(error: BaseException, alias: str) -> bool:
    """Whether ``error``, raised by a job, means the database went away under it (see above)."""
    chain = list(_causes(error))
    if not any(isinstance(exc, CONNECTION_ERRORS) for exc in chain):
        return False
    for exc in chain:
        # Any database's driver: the job may have used another database than the jobs'.
        for driver in DRIVERS.values():
            verdict = driver.says_connection_lost(exc)
            if verdict is not None:
                return verdict
    return not _connection_works(alias)


def reachable(alias: str) -> bool:
    """Whether this thread can reach the database ``alias`` now: its connection answers, or a new
    one can be opened. A broken connection is closed, so that the next query opens another."""
    connection = connections[alias]
    try:
        if connection.connection is not None and connection.is_usable():
            return True
        connection.close()
        connection.ensure_connection()
        return connection.is_usable()
    except DatabaseError:
        _close(alias)
        return False


def server_stayed_up(alias: str, since: float) -> bool:
    """Whether the database ``alias`` answers now and its server has been up since ``since``
    (``time.monotonic()`` when the run that lost its connection began): then the run lost only
    its own connection."""
    return reachable(alias) and not restarted_since(alias, since)


def restarted_since(alias: str, since: float) -> bool:
    """Whether the server of ``alias`` started after ``since`` (``time.monotonic()``), by its own
    uptime (so no clock skew enters); False where there is no server (SQLite). One that does not
    answer the question now is taken as gone.

    The run's length is read after the uptime, not when the error was caught: ``reachable`` may
    have waited for the server (PgBouncer holds a query until the server is back), and a run
    that began just before a restart must not look shorter than the server's new uptime."""
    try:
        uptime = server_uptime(alias)
    except DatabaseError:
        _close(alias)
        return True
    return uptime is not None and uptime < time.monotonic() - since


def server_uptime(alias: str) -> float | None:
    """The seconds the server of ``alias`` has surely been up, by its own clock; None where
    there is no server (SQLite). A server that does not answer raises the driver's error."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        return ops(connection).server_uptime(cursor)


def _connection_works(alias: str) -> bool:
    connection = connections[alias]
    if connection.connection is None:  # closed after the error (e.g. by atomic's rollback)
        return reachable(alias)
    try:
        if connection.is_usable():
            return True
    except DatabaseError:
        pass
    _close(alias)
    return False


def _close(alias: str) -> None:
    try:
        connections[alias].close()
    except DatabaseError:
        pass  # it was broken anyway


def _causes(error: BaseException, depth: int = 8):
    """``error``, then what caused it (``raise ... from``, or raised while handling), a few deep:
    Django's database errors wrap the driver's as their cause, and a job may wrap either."""
    seen = set()
    while error is not None and id(error) not in seen and len(seen) < depth:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__

