"""Wake idle workers when jobs are enqueued, instead of waiting for their next poll.

On PostgreSQL (unless ``SQLQUEUE["NOTIFY"]`` is off) one ``NOTIFY django_sqlqueue, '<queues>'`` is
sent per transaction, after it commits, naming every queue it enqueued to. Workers in the same
process (any database) are woken through an in-process event. Both are hints only: workers poll
as well, so a lost notification delays a job by one poll interval at most.
"""

import logging
import threading
import weakref

from django.db import connections, transaction

from .conf import get_settings

CHANNEL = "django_sqlqueue"
logger = logging.getLogger(__name__)
_local_wakeups: "weakref.WeakSet[threading.Event]" = weakref.WeakSet()


def subscribe_in_process(event: threading.Event) -> None:
    """Have ``event`` set whenever this process commits an enqueue (any database)."""
    _local_wakeups.add(event)


class _PendingNotify:
    """The one after-commit callback of a transaction; collects the queues it enqueued to."""

    def __init__(self, alias: str, queues: set, send_notify: bool):
        self.alias = alias
        self.queues = set(queues)
        self.send_notify = send_notify

    def __call__(self):
        for event in list(_local_wakeups):
            event.set()
        if not self.send_notify:
            return
        try:
            with connections[self.alias].cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, ",".join(sorted(self.queues))])
        except Exception:  # a hint only: polling will find the jobs
            logger.warning(
                "could not send NOTIFY for queues %s", sorted(self.queues), exc_info=True
            )


def jobs_enqueued(alias: str, queues) -> None:
    """Called after jobs were inserted on ``alias``: schedule the wake-up for commit time."""
    connection = connections[alias]
    send_notify = connection.vendor == "postgresql" and get_settings().NOTIFY
    if not send_notify and not _local_wakeups:
        return
    pending = getattr(connection, "_sqlqueue_pending_notify", None)
    if pending is not None and any(entry[1] is pending for entry in connection.run_on_commit):
        pending.queues.update(queues)  # this transaction already has its callback
        return
    pending = _PendingNotify(alias, set(queues), send_notify)
    connection._sqlqueue_pending_notify = pending
    transaction.on_commit(pending, using=alias)
