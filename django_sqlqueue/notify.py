"""Wake idle workers when jobs are enqueued, instead of waiting for their next poll.

On PostgreSQL (unless ``SQLQUEUE["NOTIFY"]`` is off) the statement that inserts jobs also sends
``NOTIFY django_sqlqueue, '<queue>'`` for each of their queues (see inserting.py). PostgreSQL
delivers a notification only when its transaction commits, drops it if the transaction (or the
savepoint) rolls back, and delivers identical notifications of one transaction once, so listeners
hear each queue once per committed transaction, and nothing costs a round trip of its own.

Workers in the same process (any database) are woken through an in-process event, after commit.
Both are hints only: workers poll as well, so a lost notification delays a job by one poll
interval at most.
"""

import threading
import weakref

from django.db import transaction

from .conf import get_settings

CHANNEL = "django_sqlqueue"
#: ``JobQuerySet.cancel`` notifies this channel when it asked running jobs to stop, so that
#: their workers look at once instead of at their next heartbeat (worker/cancels.py).
CANCEL_CHANNEL = "django_sqlqueue_cancel"
_local_wakeups: "weakref.WeakSet[threading.Event]" = weakref.WeakSet()


def sends_notify(connection) -> bool:
    """Whether inserting jobs on ``connection`` sends NOTIFY (done by the INSERT itself)."""
    return connection.vendor == "postgresql" and get_settings().NOTIFY


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
