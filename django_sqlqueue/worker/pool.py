"""The threads that run jobs, and the jobs this process holds.

A job is "held" from the moment it is claimed until its outcome is written; the fetcher never
claims more jobs than there are free slots (size minus held), so no claimed job waits in a
local queue while its lease ticks.
"""

import logging
import queue
import threading
import time
from dataclasses import dataclass

from ..execution import Outcome, apply_outcome, call_task, report
from .resilience import TRANSIENT, call_with_retry, tidy_connections

logger = logging.getLogger(__name__)


@dataclass
class HeldJob:
    job: object
    claimed_at: float  # time.monotonic()
    started_at: float | None = None  # None while waiting for a thread
    deadline: float | None = None  # time.monotonic() past which the job has timed out
    timed_out: bool = False


class Pool:
    def __init__(self, size: int, *, alias: str, default_timeout, outcome_deadline: float,
                 on_slot_free, completer=None):
        self.size = size
        self.alias = alias
        self.default_timeout = default_timeout
        self.outcome_deadline = outcome_deadline  # seconds to keep retrying an outcome write
        self.on_slot_free = on_slot_free
        self.completer = completer  # writes successes in batches; None: each job writes its own
        self.jobs_done = 0
        self._inbox: queue.Queue = queue.Queue()
        self._held: dict = {}
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, name=f"sqlqueue-job-{n}", daemon=True)
            for n in range(size)
        ]

    def start(self):
        for thread in self._threads:
            thread.start()

    # ---- what the fetcher and heartbeat see ------------------------------------------------
    def free_slots(self) -> int:
        with self._lock:
            return self.size - len(self._held)

    def held(self) -> list:
        with self._lock:
            return list(self._held.values())

    def busy(self) -> list:
        """Held jobs still worth waiting for (a timed-out job is already failed)."""
        with self._lock:
            return [entry for entry in self._held.values() if not entry.timed_out]

    def is_idle(self) -> bool:
        with self._lock:
            return not self._held

    def submit(self, job) -> None:
        with self._lock:
            self._held[job.pk] = HeldJob(job, claimed_at=time.monotonic())
        self._inbox.put(job)

    def take_unstarted(self) -> list:
        """Remove the jobs no thread has started yet (for release at shutdown)."""
        taken = []
        while True:
            try:
                job = self._inbox.get_nowait()
            except queue.Empty:
                break
            if job is None:
                continue
            with self._lock:
                self._held.pop(job.pk, None)
            taken.append(job)
        return taken

    def stop(self):
        for _ in self._threads:
            self._inbox.put(None)

    # ---- the job threads -------------------------------------------------------------------
    def _work(self):
        while True:
            job = self._inbox.get()
            if job is None:
                return
            try:
                self._run(job)
            except Exception:  # never lose a thread; the lease brings the job back
                logger.exception("job thread failed around job id=%s", job.pk)
            finally:
                with self._lock:
                    self._held.pop(job.pk, None)
                    self.jobs_done += 1
                self.on_slot_free()

    def _run(self, job):
        with self._lock:
            entry = self._held.get(job.pk)
            if entry is None:  # released by a shutdown before it started
                return
            entry.started_at = time.monotonic()
            timeout = job.timeout_seconds or self.default_timeout
            entry.deadline = entry.started_at + timeout if timeout else None
        tidy_connections()  # replaces broken ones; honours CONN_MAX_AGE > 0
        try:
            outcome = call_task(job)
        except BaseException as exc:  # SystemExit in a job thread: a failed job, not a dead thread
            outcome = Outcome("failed", error=exc)
        if entry.timed_out:
            # The heartbeat already failed this attempt; the late outcome is fenced out anyway.
            logger.warning(
                "job finished after its timeout task=%s id=%s attempt=%s duration_ms=%.1f",
                job.task_name, job.pk, job.attempts, outcome.duration_seconds * 1000,
            )
            return
        if outcome.kind == "succeeded" and self.completer is not None:
            self.completer.add(job, outcome)  # written (and logged) with the next batch
            return
        try:
            applied = call_with_retry(
                lambda: apply_outcome(job, outcome),
                alias=self.alias,
                what=f"recording the outcome of job {job.pk}",
                deadline=time.monotonic() + self.outcome_deadline,
            )
        except TRANSIENT:
            logger.error(
                "gave up recording the outcome of job id=%s; its lease will run it again", job.pk
            )
            return
        report(job, outcome, applied)
        tidy_connections()
