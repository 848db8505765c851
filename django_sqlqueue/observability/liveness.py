"""Whether a worker is alive, judged by its heartbeat, and which queues it takes: shared by the
admin, the dashboard and ``manage.py stats``.

A worker beats every LEASE_SECONDS / 3; housekeeping reaps a worker after two leases without a
heartbeat. So a worker is *alive* while its last beat is at most one lease old (two beats may be
late), *late* up to two leases, and *presumed dead* after that, until housekeeping removes it.
"""

import datetime as dt

from django.utils import timezone

from ..conf import get_settings

ALIVE, LATE, DEAD = "alive", "late", "presumed dead"


def heartbeat_state(worker, now=None) -> str:
    now = now or timezone.now()
    lease = dt.timedelta(seconds=get_settings().LEASE_SECONDS)
    age = now - worker.last_heartbeat_at
    if age <= lease:
        return ALIVE
    return LATE if age <= 2 * lease else DEAD


def serves(worker, queue: str) -> bool:
    """The worker takes jobs of ``queue`` (a worker with no queues takes every queue)."""
    return not worker.queues or queue in worker.queues
