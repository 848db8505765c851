"""An operator's ``run_now()`` against a transaction that locks the same jobs in the other order
(as a worker's claim or outcome write can): the database rolls one of the two back as a
deadlock's victim, and ``run_now``, called outside a transaction, tries again instead of failing.
"""

import datetime as dt
import threading

import pytest
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from django_sqlqueue.db.batches import retrying_deadlocks
from django_sqlqueue.models import Job
from tests.support.waiting import wait_until
from tests.testapp.tasks import add

pytestmark = [pytest.mark.server_database, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(120)]


def _waiting_for_a_lock(connection) -> bool:
    """Whether some session waits for a row lock now (the run_now below, blocked)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
        else:
            cursor.execute("SELECT count(*) FROM information_schema.innodb_lock_waits")
        return cursor.fetchone()[0] > 0


def test_run_now_outside_a_transaction_is_retried_when_a_deadlock_picks_it():
    # The victim is the session whose deadlock check, deadlock_timeout (1 s) after it began to
    # wait, finds the cycle closed: run_now waits first, so it is the victim unless the other
    # closes the cycle more than a second later (CI, three passes on two cores: the other was
    # picked once, behind PgBouncer). Such a round proves nothing about run_now: it is run again.
    for _ in range(3):
        other_failed = _race()
        if not other_failed:
            break  # run_now was the victim, and its second attempt did the work
    assert not other_failed, other_failed


def _race() -> list:
    """One round: run_now against a transaction that locks the same jobs in the other order;
    checks that run_now did the work, and returns the other's errors (a deadlock if the
    database picked it as the victim instead)."""
    Job.objects.all().delete()
    later = timezone.now() + dt.timedelta(hours=1)
    first, second = (add.using(run_at=later).enqueue(1, n) for n in (1, 2))
    # Rows the other transaction changes too: MariaDB rolls back the lighter of the two (the
    # one that changed fewer rows), PostgreSQL the one that waited first. run_now, either way.
    ballast = [add.enqueue(2, n).pk for n in range(5)]
    other_failed = []

    def the_other_order():
        """Lock the second job, wait until run_now holds the first and waits for the second,
        then ask for the first: a cycle. Its own connections: Django's belong to a thread."""
        other = connections.create_connection("default")
        watcher = connections.create_connection("default")
        try:
            other.set_autocommit(False)
            with other.cursor() as cursor:
                cursor.execute("UPDATE django_sqlqueue_job SET priority = 1 "
                               "WHERE id IN (%s, %s, %s, %s, %s, %s)", [second.pk, *ballast])
                locked.set()
                wait_until(lambda: _waiting_for_a_lock(watcher), timeout=30,
                           what="run_now to wait for the second job")
                # On PostgreSQL the COMMIT goes with the UPDATE (one text, bound on the client):
                # it ends as soon as it has the row, without waiting for this thread's turn.
                cursor.execute(
                    "UPDATE django_sqlqueue_job SET priority = 1 WHERE id = %s; COMMIT"
                    if other.vendor == "postgresql" else
                    "UPDATE django_sqlqueue_job SET priority = 1 WHERE id = %s", [first.pk])
            other.commit()
        except DatabaseError as exc:  # the database may pick this one as the victim instead
            other_failed.append(exc)
            other.rollback()
        finally:
            other.close()
            watcher.close()

    locked = threading.Event()
    thread = threading.Thread(target=the_other_order)
    thread.start()
    try:
        assert locked.wait(30)
        # Locks the first job (lowest id first), then waits for the second.
        assert Job.objects.filter(pk__in=[first.pk, second.pk]).run_now() == 2
    finally:
        thread.join(60)
    assert not Job.objects.filter(run_at__gt=timezone.now()).exists()
    if not other_failed:
        assert set(Job.objects.values_list("priority", flat=True)) == {1}
    return other_failed


def test_inside_a_transaction_a_deadlock_is_the_callers_to_redo():
    """The victim's whole transaction is gone: a retry of the last statement would run in a
    transaction that no longer holds the caller's earlier writes."""
    calls = []

    def deadlocked():
        calls.append(1)
        raise _deadlock(connections["default"].vendor)

    with pytest.raises(DatabaseError), transaction.atomic():
        retrying_deadlocks("default", deadlocked)
    assert calls == [1]
    calls.clear()
    waits = []
    with pytest.raises(DatabaseError):
        retrying_deadlocks("default", deadlocked, attempts=3, sleep=waits.append)
    assert calls == [1, 1, 1]  # outside one: tried three times in all
    assert len(waits) == 2 and 0.05 <= waits[0] <= 0.15 and 0.1 <= waits[1] <= 0.3


def _deadlock(vendor) -> DatabaseError:
    """The error the client raises for a deadlock's victim, wrapped as Django wraps it."""
    if vendor == "postgresql":
        import psycopg

        cause = psycopg.errors.DeadlockDetected("deadlock detected")
    else:
        import MySQLdb

        cause = MySQLdb.OperationalError(1213, "Deadlock found when trying to get lock")
    error = DatabaseError(str(cause))
    error.__cause__ = cause
    return error
