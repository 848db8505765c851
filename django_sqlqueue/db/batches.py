"""One short transaction per batch, for work that touches many rows (pruning, rescuing, expiring).

A statement that deletes a million rows holds a million row locks and one snapshot until it
commits; the same work in batches of a thousand, each committed on its own, never holds more than
a thousand, and lets vacuum and the workers' claims through in between. On PostgreSQL each batch
also gets a statement timeout of its own (``SET LOCAL statement_timeout``), so a batch stuck on a
lock fails alone instead of stalling the rest.
"""

import contextlib
import random
import time

from django.db import DatabaseError, connections, transaction

from . import ops


def write_lock_first(alias: str, model) -> None:
    """At the start of a transaction that reads before it writes: take the write lock now,
    where the database would otherwise take it at the first write and refuse to wait for it
    then (SQLite's deferred transactions; the driver's ``take_write_lock``)."""
    connection = connections[alias]
    statement = ops(connection).take_write_lock(model)
    if statement is not None:
        text, params = statement
        with connection.cursor() as cursor:
            cursor.execute(text, params)


@contextlib.contextmanager
def short_transaction(alias: str, statement_timeout: float | None = None):
    """``transaction.atomic(using=alias)`` with, on PostgreSQL, each statement limited to
    ``statement_timeout`` seconds (None: no limit). Inside a caller's transaction it is a
    savepoint, and the caller's transaction keeps its own limits (a ``SET LOCAL`` would outlive
    the savepoint)."""
    connection = connections[alias]
    outermost = not connection.in_atomic_block
    with transaction.atomic(using=alias):
        if outermost and statement_timeout is not None:
            statement = ops(connection).statement_timeout(seconds=statement_timeout)
            if statement is not None:
                with connection.cursor() as cursor:
                    text, params = statement
                    cursor.execute(text, params)
        yield connection


def retrying_deadlocks(alias: str, write, *, attempts: int = 5, sleep=time.sleep):
    """``write()``, and again (up to ``attempts`` times in all) if the database rolled it back as
    a deadlock's victim: an operator's bulk change (``run_now``) against the workers' claims and
    outcome writes, which lock rows in another order (MariaDB picks a victim and says "try
    restarting transaction"). Outside a transaction only: inside one, the deadlock rolled back
    the caller's whole transaction, which only the caller can redo.

    Each attempt after the first waits a little longer (0.1 s, doubled each time, jittered) for
    the other transaction to end: PostgreSQL wakes the transaction that waited, but does not
    hand it the rows, and an attempt made at once on a busy server took the same rows first and
    deadlocked again (three times in a row, in CI)."""
    connection = connections[alias]
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except DatabaseError as exc:
            if (connection.in_atomic_block or attempt == attempts
                    or not ops(connection).says_deadlock(exc.__cause__ or exc)):
                raise
        sleep(0.1 * 2 ** (attempt - 1) * random.uniform(0.5, 1.5))
    raise AssertionError("unreachable")  # the last attempt returned or raised
