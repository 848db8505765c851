"""The threads that run jobs, and the jobs this process holds.

A job is "held" from the moment it is claimed until its outcome is written. The fetcher claims
up to the free slots: the threads, plus - while recent jobs were short - several jobs per thread
claimed ahead, so the threads have work while the next claim is on its way (for short jobs the
claim's round trip, not the jobs, would otherwise set the pace). A job claimed ahead waits for a
thread for at most ``CLAIMED_AHEAD_MAX_WAIT`` seconds; after that the fetcher releases it, so a
few long jobs cannot hold back work another worker could do.
"""

import logging
import queue
import threading
import time
from dataclasses import dataclass

from django.db import connections

from ..execution import Outcome, apply_outcome, call_task, report
from .resilience import TRANSIENT, call_with_retry, tidy_connections

logger = logging.getLogger(__name__)
#: Jobs are claimed ahead only while the recent average job took less than this (seconds).
SHORT_JOB_SECONDS = 0.05
#: While jobs are short, a process holds up to this many jobs per thread. Bigger claims cost the
#: database less per job (one statement and one commit for more rows): 8 drained no-op jobs about
#: 40% faster than 4 in the benchmark. At under 50 ms a job, 8 per thread is under 0.4 s of work.
CLAIM_AHEAD_PER_THREAD = 8
#: A job claimed ahead that has not started after this long is released (see the docstring).
CLAIMED_AHEAD_MAX_WAIT = 1.0


class PoolStartError(RuntimeError):
    """The system refused to start all of the pool's threads."""


@dataclass
class HeldJob:
    job: object
    claimed_at: float  # time.monotonic()
    started_at: float | None = None  # None while waiting for a thread
    deadline: float | None = None  # time.monotonic() past which the job has timed out
    timed_out: bool = False


class Pool:
    def __init__(self, size: int, *, alias: str, default_timeout, outcome_deadline: float,
                 on_slot_free, completer=None, on_result=None):
        self.size = size
        self.alias = alias
        self.default_timeout = default_timeout
        self.outcome_deadline = outcome_deadline  # seconds to keep retrying an outcome write
        self.on_slot_free = on_slot_free
        self.completer = completer  # writes successes in batches; None: each job writes its own
        self.on_result = on_result or (lambda result: None)  # each written job's RunResult
        self.jobs_done = 0  # attempts run (a retried job counts once per attempt)
        self.mean_duration = None  # moving average of recent jobs' run time, seconds
        # SimpleQueue: put/get in C, without queue.Queue's conditions; one hand-off per job.
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._held: dict = {}
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, name=f"sqlqueue-job-{n}", daemon=True)
            for n in range(size)
        ]

    def start(self):
        for started, thread in enumerate(self._threads):
            try:
                thread.start()
            except RuntimeError as exc:  # "can't start new thread": a system or container limit
                self.stop()  # the threads already started end at once: nothing was submitted
                raise PoolStartError(
                    f"could only start {started} of {self.size} job threads ({exc}): lower "
                    "--concurrency, or raise the limits on processes and memory (ulimit -u and "
                    "-v, the container's pids and memory limits)."
                ) from None

    # ---- what the fetcher and heartbeat see ------------------------------------------------
    def capacity(self) -> int:
        """How many jobs to hold: the threads, plus as many claimed ahead while jobs are short."""
        short = self.mean_duration is not None and self.mean_duration < SHORT_JOB_SECONDS
        return CLAIM_AHEAD_PER_THREAD * self.size if short else self.size

    def free_slots(self) -> int:
        capacity = self.capacity()
        with self._lock:
            return capacity - len(self._held)

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

    def take_waiting(self, longer_than: float) -> list:
        """Withdraw the jobs that have waited for a thread longer than ``longer_than`` seconds
        (the caller releases them); a thread that later takes one from the inbox skips it."""
        cutoff = time.monotonic() - longer_than
        with self._lock:
            stale = [entry.job for entry in self._held.values()
                     if entry.started_at is None and entry.claimed_at < cutoff]
            for job in stale:
                del self._held[job.pk]
        return stale

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

    def stop(self, *, wait: float | None = None):
        """Let every thread end once the jobs before it in the inbox are done; ``wait``: seconds
        to wait for them."""
        for _ in self._threads:
            self._inbox.put(None)
        if wait is not None:
            for thread in self._threads:
                thread.join(wait)

    # ---- the job threads -------------------------------------------------------------------
    def _work(self):
        while True:
            job = self._inbox.get()
            if job is None:
                connections.close_all()  # this thread's own connections
                return
            ran = False
            try:
                ran = self._run(job)
            except Exception:  # never lose a thread; the lease brings the job back
                logger.exception("job thread failed around job id=%s", job.pk)
            finally:
                with self._lock:
                    self._held.pop(job.pk, None)
                    self.jobs_done += bool(ran)
                self.on_slot_free()

    def _run(self, job):
        with self._lock:
            entry = self._held.get(job.pk)
            if entry is None:  # withdrawn before it started (shutdown, waited too long)
                return False
            entry.started_at = time.monotonic()
            timeout = job.timeout_seconds or self.default_timeout
            entry.deadline = entry.started_at + timeout if timeout else None
        tidy_connections()  # replaces broken ones; honours CONN_MAX_AGE > 0
        try:
            outcome = call_task(job)
        except BaseException as exc:  # SystemExit in a job thread: a failed job, not a dead thread
            outcome = Outcome("failed", error=exc)
        self._record_duration(outcome.duration_seconds)
        if entry.timed_out:
            # The heartbeat already failed this attempt; the late outcome is fenced out anyway.
            logger.warning(
                "job finished after its timeout task=%s id=%s attempt=%s duration_ms=%.1f",
                job.task_name, job.pk, job.attempts, outcome.duration_seconds * 1000,
            )
            return True
        if outcome.kind == "succeeded" and self.completer is not None:
            self.completer.add(job, outcome)  # written (and logged) with the next batch
            return True
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
            return True
        self.on_result(report(job, outcome, applied))
        tidy_connections()
        return True

    def _record_duration(self, seconds: float) -> None:
        previous = self.mean_duration
        self.mean_duration = seconds if previous is None else 0.9 * previous + 0.1 * seconds
