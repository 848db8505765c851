"""``server_connection_id``: the id a server knows a connection by; ``end_connection``: the
server ends one connection, as a restart, a failover or an operator would, for tests that need a
connection to break at a chosen point (PostgreSQL, MariaDB); ``sleep_on_server`` and
``sleeping_on_server``: a statement that is in flight, by construction, when the server goes
away."""

import threading

from django.db import connections

from tests.support.waiting import wait_until

#: Per vendor: this connection's id on the server; ending a connection by id (waiting for its
#: end, where the server can); whether a connection of that id is still there.
_STATEMENTS = {
    "postgresql": ("SELECT pg_backend_pid()", "SELECT pg_terminate_backend(%s, 30000)",
                   "SELECT count(*) FROM pg_stat_activity WHERE pid = %s"),
    "mysql": ("SELECT CONNECTION_ID()", "KILL CONNECTION %s",
              "SELECT count(*) FROM information_schema.processlist WHERE id = %s"),
}


def end_connection(alias="default") -> None:
    """End this thread's connection to ``alias`` from the server's side, from another
    connection, and return once the server no longer has it: this thread's next statement on
    it fails as after a restart."""
    _, end, count = _STATEMENTS[connections[alias].vendor]
    ident = server_connection_id(alias)
    errors = []

    def from_another_connection():
        try:
            with connections[alias].cursor() as cursor:
                cursor.execute(end, [ident])
            wait_until(lambda: _count(alias, count, ident) == 0, what="the connection to end")
        except Exception as exc:  # noqa: BLE001 - raised in the calling thread
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=from_another_connection)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def server_connection_id(alias="default") -> int:
    """The id the server knows this thread's connection to ``alias`` by."""
    with connections[alias].cursor() as cursor:
        cursor.execute(_STATEMENTS[connections[alias].vendor][0])
        return cursor.fetchone()[0]


def _count(alias, statement, ident) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute(statement, [ident])
        return cursor.fetchone()[0]


#: Per vendor: a statement that sleeps on the server; one that counts the connections running it.
_SLEEPS = {
    "postgresql": ("SELECT pg_sleep(%s)",
                   "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(%%'"),
    "mysql": ("SELECT SLEEP(%s)",
              "SELECT count(*) FROM information_schema.processlist"
              " WHERE info LIKE 'SELECT SLEEP(%%'"),
}


def sleep_on_server(seconds, alias="default") -> None:
    """Run a statement that sleeps ``seconds`` on the server, on this thread's connection."""
    with connections[alias].cursor() as cursor:
        cursor.execute(_SLEEPS[connections[alias].vendor][0], [seconds])


def sleeping_on_server(alias="default") -> bool:
    """Whether a connection is running ``sleep_on_server``'s statement now."""
    with connections[alias].cursor() as cursor:
        cursor.execute(_SLEEPS[connections[alias].vendor][1])
        return cursor.fetchone()[0] > 0
