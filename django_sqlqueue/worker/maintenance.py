"""The cleaner: expire jobs past their max age, rescue jobs whose worker is gone, reap dead
workers' rows, and prune old finished jobs.

Every step is a fenced or idempotent update, so running it twice at once is safe (SQLite, MySQL).
On PostgreSQL one worker at a time does it, under a transaction-level advisory lock.
"""

import datetime as dt
import logging
import os
import socket

from django.db import connections, transaction
from django.utils import timezone

from ..models import Job, Worker

logger = logging.getLogger(__name__)
ADVISORY_LOCK_KEY = 0x53514C51_4D41494E  # "SQLQ" "MAIN": an arbitrary constant, ours alone


#: Pruning reads the finished rows without an index (one would cost a write per job), so it runs
#: at most this often rather than at every pass.
PRUNE_EVERY_SECONDS = 600


class Maintenance:
    def __init__(self, *, alias: str, lease_seconds: float, keep_succeeded, keep_failed,
                 host=None):
        self.alias = alias
        self.lease_seconds = lease_seconds
        self.keep_succeeded = keep_succeeded
        self.keep_failed = keep_failed
        self.host = host or socket.gethostname()
        self.pruned_at = None  # when this process last pruned

    def run_once(self, now=None) -> dict:
        """One pass. Returns counts, or {} when another worker holds the lock (PostgreSQL)."""
        now = now or timezone.now()
        with transaction.atomic(using=self.alias):
            if not self._lock():
                return {}
            counts = {
                "expired": Job.objects.using(self.alias).expire(now),
                "reaped": self.reap_dead_workers(now),
                "rescued": Job.objects.using(self.alias).lease_expired(now).rescue(now),
                "pruned": self._prune(now),
            }
        if any(counts.values()):
            logger.info("maintenance %s", " ".join(f"{k}={v}" for k, v in counts.items()))
        return counts

    def _prune(self, now) -> int:
        if self.pruned_at is not None and (now - self.pruned_at).total_seconds() < (
            PRUNE_EVERY_SECONDS
        ):
            return 0
        self.pruned_at = now
        return Job.objects.using(self.alias).prune(
            now, keep_succeeded=self.keep_succeeded, keep_failed=self.keep_failed
        )

    def _lock(self) -> bool:
        connection = connections[self.alias]
        if connection.vendor != "postgresql":
            return True
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
            return cursor.fetchone()[0]

    def reap_dead_workers(self, now) -> int:
        """Delete the rows of workers known to be dead and rescue their running jobs at once.

        Dead: no heartbeat for two leases, or (on this host) a pid that no longer exists.
        """
        stale_before = now - dt.timedelta(seconds=2 * self.lease_seconds)
        reaped = 0
        for worker in Worker.objects.using(self.alias).all():
            if worker.last_heartbeat_at < stale_before:
                reason = "it stopped sending heartbeats"
            elif worker.host == self.host and not _pid_alive(worker.pid):
                reason = f"its process {worker.pid} no longer exists"
            else:
                continue
            rescued = Job.objects.using(self.alias).filter(claimed_by=worker.name).rescue(
                now, reason=f"worker {worker.name} is dead: {reason}"
            )
            worker.delete()
            reaped += 1
            logger.warning("reaped dead worker=%s reason=%r rescued=%s", worker.name, reason,
                           rescued)
        return reaped


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True
