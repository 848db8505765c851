"""Riding out database restarts and dropped connections.

A worker never dies of a transient database error: it logs it, drops the broken connection so
the next query reconnects, waits with exponential backoff, and tries again.
"""

import logging
import time

from django.db import DatabaseError, InterfaceError, OperationalError, connections

logger = logging.getLogger(__name__)
TRANSIENT = (OperationalError, InterfaceError)


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


def call_with_retry(fn, *, alias: str, what: str, deadline: float | None = None, stop=None):
    """Call ``fn`` until it succeeds, retrying transient database errors with backoff.

    Gives up (re-raising) after ``deadline`` (a time.monotonic() value) or once ``stop()`` is
    true, so a shutdown is never held hostage by a database that is gone.
    """
    backoff = Backoff()
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
