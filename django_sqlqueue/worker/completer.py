"""Writes successful outcomes in batches: one fenced UPDATE for many jobs.

Every commit costs a WAL flush, so one UPDATE per finished job would make commits, not jobs, the
limit. Job threads hand their successes here and move on; this thread writes whatever has
gathered every ``interval`` seconds (or at once when ``max_batch`` are waiting), and everything at
shutdown. A crash loses at most the unwritten batch: those jobs are still running in the table,
their leases expire, and they run again (at-least-once, as with any crash).
"""

import logging
import threading
import time

from django.db import connections
from django.utils import timezone

from .. import sql
from ..execution import report
from ..models import Job
from .resilience import TRANSIENT, call_with_retry

logger = logging.getLogger(__name__)


class Completer:
    def __init__(self, *, alias: str, interval=0.02, max_batch=500, outcome_deadline=300.0,
                 on_result=None):
        self.alias = alias
        self.on_result = on_result or (lambda result: None)  # each written job's RunResult
        self.interval = interval
        self.max_batch = max_batch
        self.outcome_deadline = outcome_deadline
        self._pending: list = []  # (job, outcome, finished_at)
        self._lock = threading.Lock()
        self._full = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sqlqueue-completer", daemon=True)

    def start(self):
        self._thread.start()

    def add(self, job, outcome) -> None:
        with self._lock:
            self._pending.append((job, outcome, timezone.now()))
            if len(self._pending) >= self.max_batch:
                self._full.set()

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def stop(self, timeout=30.0) -> None:
        """Write what is waiting and stop."""
        self._stop.set()
        self._full.set()
        self._thread.join(timeout)

    def _loop(self):
        while True:
            self._full.wait(self.interval)
            self._full.clear()
            self.flush()
            if self._stop.is_set():
                self.flush()
                connections[self.alias].close()
                return

    def flush(self) -> int:
        with self._lock:
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch:]
            if self._pending:
                self._full.set()
        if not batch:
            return 0
        try:
            written = call_with_retry(
                lambda: self._write(batch), alias=self.alias,
                what=f"recording {len(batch)} finished job(s)",
                deadline=time.monotonic() + self.outcome_deadline,
            )
        except TRANSIENT:
            logger.error("gave up recording %s finished job(s); their leases will run them again",
                         len(batch))
            return 0
        for job, outcome, finished_at in batch:
            applied = job.pk in written
            if applied:
                job.status, job.result, job.finished_at = "succeeded", outcome.result, finished_at
            self.on_result(report(job, outcome, applied))
        return len(batch)

    def _write(self, batch) -> set:
        connection = connections[self.alias]
        rows = [(job.pk, job.claim_token, outcome.result, finished_at)
                for job, outcome, finished_at in batch]
        statement, params = sql.complete_many(Job, connection, rows)
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            return {row[0] for row in cursor.fetchall()}
