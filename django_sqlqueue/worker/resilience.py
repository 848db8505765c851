"""Riding out database restarts and dropped connections.

A worker never dies of a transient database error: it logs it, drops the broken connection so
the next query reconnects, waits with exponential backoff, and tries again.
"""

import logging
import threading
import time

from django.db import DatabaseError, connections

from ..db import outages

logger = logging.getLogger(__name__)
#: The errors a worker rides out: those of a lost connection (outages.CONNECTION_ERRORS). An
#: ``InternalError`` among them: psycopg's connection out of step with the server after a
#: restart behind PgBouncer ("received 2 results from command 'BEGIN'") ended the worker's
#: process at its next claim.
TRANSIENT = outages.CONNECTION_ERRORS


def tidy_connections() -> None:
    """Between jobs: replace broken connections and end transactions a job left open.

    A connection with CONN_MAX_AGE > 0 is also closed once older than that. With Django's default
    CONN_MAX_AGE = 0, meant for web requests, a worker keeps its connections from job to job:
    closing them would open a new database connection for every job.
    """
    for connection in connections.all(initialized_only=True):
        if connection.settings_dict["CONN_MAX_AGE"] != 0:
            connection.close_if_unusable_or_obsolete()
        elif connection.connection is not None:
            if connection.get_autocommit() != connection.settings_dict["AUTOCOMMIT"]:
                connection.close()
            elif connection.errors_occurred:
                if connection.is_usable():
                    connection.errors_occurred = False
                else:
                    connection.close()


def drop_connection(alias: str) -> None:
    """Close this thread's connection to ``alias`` so that the next query opens a new one."""
    try:
        connections[alias].close()
    except DatabaseError:
        pass  # it was broken anyway


class Backoff:
    """Waits 0.5 s, 1 s, 2 s ... up to ``maximum`` between failed tries; resets on success."""

    def __init__(self, initial=0.5, maximum=10.0):
        self.initial, self.maximum = initial, maximum
        self.failures = 0

    def reset(self):
        self.failures = 0

    def next_delay(self) -> float:
        delay = min(self.initial * 2**self.failures, self.maximum)
        self.failures += 1
        return delay


def call_with_retry(fn, *, alias: str, what: str, deadline: float | None = None, stop=None,
                    max_delay: float = 10.0):
    """Call ``fn`` until it succeeds, retrying transient database errors with backoff (0.5 s,
    doubling, up to ``max_delay``).

    Gives up (re-raising) after ``deadline`` (a time.monotonic() value) or once ``stop()`` is
    true, so a shutdown is never held hostage by a database that is gone.
    """
    backoff = Backoff(maximum=max_delay)
    while True:
        try:
            return fn()
        except TRANSIENT as exc:
            drop_connection(alias)
            delay = backoff.next_delay()
            out_of_time = deadline is not None and time.monotonic() + delay > deadline
            if out_of_time or (stop is not None and stop()):
                raise
            logger.warning(
                "database unavailable while %s (%s); retrying in %.1fs",
                what, str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                delay,
            )
            time.sleep(delay)


class DatabaseGate:
    """Held jobs start only while the jobs database answers.

    Closed when a job's run was interrupted by its database going away (or a claim found it
    unreachable): starting the jobs this worker holds would only have each of them fail at its
    first query. While closed, job threads take no job; one of them checks the database with
    backoff and opens the gate once it answers. The held jobs stay held meanwhile: their leases
    are renewed once the database is back, or, after a longer outage, the rescuer gives them
    back as interrupted.

    ``trouble`` counts the database errors reported to it (``suspect``, ``close``): a job thread
    that sees it changed checks its own connections before its next job (``check_connections``),
    since a restart or a killed-connections round also ends the connections of idle threads,
    whose next job would fail at its first query, one more interruption for nothing.
    """

    def __init__(self, alias: str, *, reachable=outages.reachable):
        self.alias = alias
        self.reachable = reachable  # reachable(alias) -> bool, on the checking thread
        self._open = threading.Event()
        self._open.set()
        self._checking = threading.Lock()
        self.trouble = 0

    def is_open(self) -> bool:
        return self._open.is_set()

    def suspect(self) -> None:
        """A connection of this process broke: every job thread checks its own."""
        self.trouble += 1

    def close(self, why: str) -> None:
        self.suspect()
        if self._open.is_set():
            self._open.clear()
            logger.warning("database unreachable (%s): starting no held job until it answers",
                           why)

    def wait(self, stopped) -> bool:
        """Block until the gate is open (True) or ``stopped()`` (False)."""
        backoff = Backoff(initial=0.1, maximum=5.0)
        while not self._open.is_set():
            if stopped():
                return False
            if not self._checking.acquire(blocking=False):
                self._open.wait(0.1)  # another thread checks
                continue
            try:
                if self.reachable(self.alias):
                    self._open.set()
                    logger.warning("database reachable again: starting held jobs")
                    return True
            finally:
                self._checking.release()
            self._open.wait(backoff.next_delay())
        return True


def check_connections() -> None:
    """Close this thread's connections that no longer answer (one round trip each), so that the
    next query opens a new one. Only after trouble (``DatabaseGate.trouble``): not per job."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.is_usable():
            try:
                connection.close()
            except DatabaseError:
                pass  # it was broken anyway


def run_every(seconds, step, name, *, alias, until, keep_connection=False, max_delay=10.0,
              logger=logger):
    """Run ``step`` every ``seconds`` on a thread of its own, until ``until`` is set.
    ``keep_connection``: with ``CONN_MAX_AGE = 0`` (Django's default) the thread keeps its
    connection from one pass to the next instead of opening one per pass; for steps that
    run every second, where a new connection (a server process forked, authenticated and
    set up) cost more than the pass itself. A failed pass is tried again with backoff up to
    ``max_delay`` (``call_with_retry``); failures are logged on ``logger``."""
    def loop():
        while not until.wait(seconds):
            failed = False
            try:
                call_with_retry(step, alias=alias, what=name, stop=until.is_set,
                                max_delay=max_delay)
            except TRANSIENT:
                failed = True
            except Exception:
                failed = True
                logger.exception("%s failed; trying again in %gs", name, seconds)
            finally:
                connection = connections[alias]
                if failed:
                    drop_connection(alias)  # a fresh one for the next pass
                elif not (keep_connection
                          and connection.settings_dict.get("CONN_MAX_AGE") == 0):
                    # Closed when broken or past CONN_MAX_AGE.
                    connection.close_if_unusable_or_obsolete()

    threading.Thread(target=loop, name=f"sqlqueue-{name}", daemon=True).start()
