"""Every LEASE_SECONDS / 3: renew the leases of held jobs, touch the worker's row, and fail the
jobs that ran past their timeout.

Leases and the worker's heartbeat are written by the database's clock (``db.clock.DatabaseNow``), as
the claim writes them and maintenance reads them, so hosts whose clocks disagree cannot cut a
lease short. Timeouts are measured on this process's monotonic clock (``clock``, injectable).
"""

import logging
import time

from ..db.clock import DatabaseNow
from ..models import Job, Worker
from ..run.runner import Outcome, OutcomeKind
from .log_format import fields
from .resilience import TRANSIENT

logger = logging.getLogger(__name__)


class JobTimeout(Exception):  # noqa: N818 - recorded as the error type of a timed-out attempt
    """The job ran longer than its timeout (the job's, the task's, or SQLQUEUE's)."""


class Heartbeat:
    def __init__(self, *, worker_id: str, alias: str, pool, lease_seconds: float, on_timeout,
                 on_missing_row, clock=time.monotonic):
        self.worker_id = worker_id
        self.alias = alias
        self.pool = pool
        self.lease_seconds = lease_seconds
        self.on_timeout = on_timeout  # called after a job timed out (process mode recycles)
        self.on_missing_row = on_missing_row
        self.clock = clock  # the pool's deadlines are on this clock

    def run_once(self) -> int:
        """One beat. Returns how many leases were renewed."""
        try:
            return self._beat()
        except TRANSIENT:
            # The job threads check their connections and read back their claims before their
            # next job (pool.py): the heartbeat fails in every outage longer than its interval,
            # even one no job's query and no claim happened to meet.
            self.pool.gate.suspect()
            raise

    def _beat(self) -> int:
        held = self.pool.held()
        self._fail_timed_out(held)
        # Jobs whose outcome waits for the writer keep their leases too: until it is written,
        # the job is this worker's.
        renewing = [entry.job.pk for entry in held if not entry.timed_out]
        renewed = Job.objects.using(self.alias).extend_leases(
            self.worker_id, renewing, lease=self.lease_seconds
        )
        touched = Worker.objects.using(self.alias).filter(name=self.worker_id).update(
            last_heartbeat_at=DatabaseNow(), jobs_done=self.pool.jobs_done
        )
        if not touched:
            self.on_missing_row()  # reaped while we were unreachable: register again
        return renewed

    def _fail_timed_out(self, held):
        now = self.clock()
        for entry in held:
            if entry.timed_out or entry.ran or entry.deadline is None or now < entry.deadline:
                continue
            self.pool.time_out(entry, timed_out(entry))
            self.on_timeout(entry.job)


def timed_out(entry) -> Outcome:
    """Log that a held job ran past its deadline and return the outcome it fails with (the
    heartbeat's, and the event loop's for an async job)."""
    seconds = entry.deadline - entry.started_at
    error = JobTimeout(f"job {entry.job.pk} ran longer than its timeout of {seconds:g}s")
    logger.warning("job timed out task=%s id=%s attempt=%s timeout_s=%g",
                   entry.job.task_name, entry.job.pk, entry.job.attempts, seconds,
                   extra=fields("job.timed_out", task=entry.job.task_name,
                                job_id=entry.job.pk, attempt=entry.job.attempts,
                                timeout_seconds=seconds))
    return Outcome(OutcomeKind.FAILED, error=error)
