"""Telling waiters that jobs ended, for writes other than the outcome write's statement (which
tells them itself: the PostgreSQL driver's ``status_written``): the transactional lane's."""

from django.db import connections

from ..db import ops
from ..db.base import FINISHED_CHANNEL
from ..statuses import FINISHED_STATUSES


def announce(alias: str, jobs) -> None:
    """In the caller's transaction (delivered at its commit, dropped on rollback): NOTIFY the id
    of each of ``jobs`` (as just written) that a waiter marked ``awaited`` and that ended. Jobs
    nobody waits for cost nothing: no statement, no NOTIFY."""
    pks = [job.pk for job in jobs if job.awaited and job.status in FINISHED_STATUSES]
    if not pks or not ops(connections[alias]).supports_notify:
        return
    ops(connections[alias]).notify(FINISHED_CHANNEL, [str(pk) for pk in pks])
