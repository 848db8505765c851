"""Wake idle workers when jobs are enqueued, instead of waiting for their next poll.

On PostgreSQL (unless ``SQLQUEUE["NOTIFY"]`` is off) the statement that inserts jobs also sends
``NOTIFY django_sqlqueue, '<queue>'`` for each of their queues (see inserting.py). PostgreSQL
delivers a notification only when its transaction commits, drops it if the transaction (or the
savepoint) rolls back, and delivers identical notifications of one transaction once, so listeners
hear each queue once per committed transaction, and nothing costs a round trip of its own.

Why not on every enqueue: a transaction that sent NOTIFY takes one lock for the whole server at
commit and holds it through its commit's flush to disk, so notifying transactions commit one after
the other instead of sharing a flush (issue 18 measured, with 16 processes enqueueing one job per
transaction, about 11% fewer enqueues per second than with NOTIFY off). So each process sends at
most ``NOTIFY_PER_SECOND`` notifications per queue (a token bucket with a burst of
``NOTIFY_BURST``, see ``NotifyLimiter``): a web process enqueueing now and then notifies every
time, one enqueueing hundreds of jobs a second about NOTIFY_PER_SECOND times a second. A job
whose notification was held back follows, within ``1 / NOTIFY_PER_SECOND``, one that was sent;
a woken worker looks again ``follow_up_seconds()`` later (worker/wakeup.py), which finds it.

Workers in the same process (any database) are woken through an in-process event, after commit.
Both are hints only: workers poll as well, so a lost notification delays a job by one poll
interval at most.
"""

import threading
import time
import weakref

from django.db import transaction

from ..conf import get_settings
from ..db import ops

CHANNEL = "django_sqlqueue"
#: ``JobQuerySet.cancel`` notifies this channel when it asked running jobs to stop, so that
#: their workers look at once instead of at their next heartbeat (worker/cancels.py).
CANCEL_CHANNEL = "django_sqlqueue_cancel"
_local_wakeups: "weakref.WeakSet[threading.Event]" = weakref.WeakSet()


#: Notifications a process may send for one queue in a burst, before NOTIFY_PER_SECOND holds
#: them back: enough that jobs enqueued a few at a time, as a web process does, all notify.
NOTIFY_BURST = 5


def sends_notify(connection) -> bool:
    """Whether inserting jobs on ``connection`` may send NOTIFY (done by the INSERT itself)."""
    return ops(connection).supports_notify and get_settings().NOTIFY


def follow_up_seconds() -> float | None:
    """How long after a NOTIFY a woken worker looks for jobs once more: long enough to find a
    job whose own notification the limiter held back (it was inserted less than
    ``1 / NOTIFY_PER_SECOND`` after the one that was sent), or None without a limit."""
    rate = get_settings().NOTIFY_PER_SECOND
    return None if rate is None else 2.0 / rate


class NotifyLimiter:
    """At most ``rate`` notifications per second per (alias, queue) in this process, with
    bursts of ``burst``: a token bucket per key. ``take`` is called as a statement is built and
    spends the tokens at once, even if that transaction later rolls back: a job then waits for
    the next notification or the poll, as for any lost hint."""

    def __init__(self, *, burst: int = NOTIFY_BURST, clock=time.monotonic):
        self.burst = burst
        self.clock = clock
        self._buckets: dict[tuple, list] = {}  # key -> [tokens, refilled at]
        self._lock = threading.Lock()  # the threads of one process share the buckets

    def take(self, alias: str, queues, rate: float | None) -> bool:
        """Whether an insert of jobs for ``queues`` on ``alias`` should notify; takes a token
        from each queue's bucket that has one (notifying one queue notifies them all: the lock
        is taken once per transaction, whatever it notifies)."""
        if rate is None:
            return True
        now = self.clock()
        allowed = False
        with self._lock:
            for queue in queues:
                bucket = self._buckets.get((alias, queue))
                if bucket is None:
                    bucket = self._buckets[(alias, queue)] = [float(self.burst), now]
                else:
                    bucket[0] = min(float(self.burst), bucket[0] + (now - bucket[1]) * rate)
                    bucket[1] = now
                if bucket[0] >= 1.0:
                    bucket[0] -= 1.0
                    allowed = True
        return allowed


_limiter = NotifyLimiter()


def should_notify(connection, queues) -> bool:
    """Whether the insert of jobs for ``queues`` on ``connection`` sends NOTIFY: on PostgreSQL
    with ``NOTIFY`` on, unless this process notified these queues often enough just now."""
    return sends_notify(connection) and _limiter.take(
        connection.alias, queues, get_settings().NOTIFY_PER_SECOND
    )


def subscribe_in_process(event: threading.Event) -> None:
    """Have ``event`` set whenever this process commits an enqueue (any database)."""
    _local_wakeups.add(event)


def _wake_in_process() -> None:
    for event in list(_local_wakeups):
        event.set()


def wake_in_process_after_commit(alias: str) -> None:
    """Called after jobs were inserted on ``alias``: wake this process's workers at commit (at
    once outside a transaction; never after a rollback). Only a process that runs workers
    registers anything: a web process pays nothing."""
    if _local_wakeups:
        transaction.on_commit(_wake_in_process, using=alias)
