"""Every LEASE_SECONDS / 3: renew the leases of held jobs, touch the worker's row, and fail the
jobs that ran past their timeout."""

import logging
import time

from django.utils import timezone

from ..models import Job, Worker

logger = logging.getLogger(__name__)


class JobTimeout(Exception):  # noqa: N818 - recorded as the error type of a timed-out attempt
    """The job ran longer than its timeout (the job's, the task's, or SQLQUEUE's)."""


class Heartbeat:
    def __init__(self, *, worker_id: str, alias: str, pool, lease_seconds: float, on_timeout,
                 on_missing_row):
        self.worker_id = worker_id
        self.alias = alias
        self.pool = pool
        self.lease_seconds = lease_seconds
        self.on_timeout = on_timeout  # called after a job timed out (process mode recycles)
        self.on_missing_row = on_missing_row

    def run_once(self, now=None) -> int:
        """One beat. Returns how many leases were renewed."""
        now = now or timezone.now()
        held = self.pool.held()
        self._fail_timed_out(held, now)
        renewing = [entry.job.pk for entry in held if not entry.timed_out]
        renewed = Job.objects.using(self.alias).extend_leases(
            self.worker_id, renewing, lease=self.lease_seconds, now=now
        )
        touched = Worker.objects.using(self.alias).filter(name=self.worker_id).update(
            last_heartbeat_at=now, jobs_done=self.pool.jobs_done
        )
        if not touched:
            self.on_missing_row()  # reaped while we were unreachable: register again
        return renewed

    def _fail_timed_out(self, held, now):
        clock = time.monotonic()
        for entry in held:
            if entry.timed_out or entry.deadline is None or clock < entry.deadline:
                continue
            seconds = entry.deadline - entry.started_at
            applied = entry.job.fail(
                JobTimeout(f"job {entry.job.pk} ran longer than its timeout of {seconds:g}s"),
                now=now,
            )
            entry.timed_out = True  # only once written: a database error retries the beat
            logger.warning(
                "job timed out task=%s id=%s attempt=%s outcome=%s timeout_s=%g",
                entry.job.task_name, entry.job.pk, entry.job.attempts,
                entry.job.status if applied else "lost", seconds,
            )
            self.on_timeout(entry.job)
