"""The threads that run jobs, and the jobs this process holds.

A job is "held" from the moment it is claimed until its outcome is written. The fetcher claims
up to the free slots: the threads, plus - while recent jobs were short - several jobs per thread
claimed ahead, so the threads have work while the next claim is on its way (for short jobs the
claim's round trip, not the jobs, would otherwise set the pace). A job claimed ahead waits for a
thread for at most ``CLAIMED_AHEAD_MAX_WAIT`` seconds; after that the fetcher releases it, so a
few long jobs cannot hold back work another worker could do.

A held job is known by its claim (``claim_of``: id and claim token), not by its id alone: the
same row can be held twice. A released job can be claimed again by the very next claim while
its old claim still waits in the inbox, and a job that timed out or lost its lease can run
again while the thread of its old claim has not returned. Each claim has its own entry, and a
thread, the writer's callback or a withdrawal only ever touches its own claim's.

Once the database was in trouble (a connection broke, the gate closed: ``resilience.py``), the
held jobs not started yet are read back before the next one starts, and those whose claims the
database no longer gives to this worker are dropped (``drop_lost_claims``): after a failover to an
asynchronous standby, claims the old primary acknowledged can be gone, their jobs ready again or
already run by another worker on the new primary. Starting them would run them twice at once.
"""

import logging
import queue
import threading
import time
from dataclasses import dataclass

from django.db import connections

from ..claim.held import still_held
from ..models import Job
from ..observability import metrics
from ..run import runner
from ..run.execution import report
from .log_format import fields
from .outcome_writer import OutcomeWriter
from .resilience import (
    TRANSIENT,
    DatabaseGate,
    check_connections,
    drop_connection,
    tidy_connections,
)

logger = logging.getLogger(__name__)
#: Jobs are claimed ahead only while the recent average job took less than this (seconds).
SHORT_JOB_SECONDS = 0.05
#: While jobs are short, a process holds up to this many jobs per thread. Bigger claims cost the
#: database less per job (one statement and one commit for more rows): 8 drained no-op jobs about
#: 40% faster than 4 in the benchmark. At under 50 ms a job, 8 per thread is under 0.4 s of work.
CLAIM_AHEAD_PER_THREAD = 8
#: A job claimed ahead that has not started after this long is released (see the docstring).
CLAIMED_AHEAD_MAX_WAIT = 1.0
#: Outcomes waiting for the writer, at most, before the fetcher stops claiming: a few batches.
MAX_UNWRITTEN = 2000


def claim_of(job) -> tuple:
    """What a held job is known by: its id and the token of its claim (``Job.claim_token``)."""
    return job.pk, job.claim_token


class PoolStartError(RuntimeError):
    """The system refused to start all of the pool's threads."""


@dataclass
class HeldJob:
    job: object
    claimed_at: float  # time.monotonic()
    started_at: float | None = None  # None while waiting for a thread
    deadline: float | None = None  # time.monotonic() past which the job has timed out
    timed_out: bool = False  # the heartbeat failed it; its thread may still be running
    ran: bool = False  # its thread is done with it
    written: bool = False  # its outcome is written (or the writer gave up)
    awaits_writer: bool = False  # counted in Pool._unwritten


class Pool:
    def __init__(self, size: int, *, alias: str, default_timeout, on_slot_free, writer=None,
                 on_result=None, max_backlog: int = MAX_UNWRITTEN, worker_id: str | None = None):
        self.size = size
        self.alias = alias
        # Whose claims the held jobs are, to read them back after trouble (drop_lost_claims);
        # None: not read back (a pool driven by a test without a worker).
        self.worker_id = worker_id
        self.default_timeout = default_timeout
        self.on_slot_free = on_slot_free
        # Writes every outcome; a job stays held until its outcome is written (outcome_written).
        self.writer = writer or OutcomeWriter(alias=alias, on_written=self.outcome_written,
                                              batched=False)
        self.on_result = on_result or (lambda result: None)  # each written job's RunResult
        self.max_backlog = max_backlog  # ran, outcome unwritten: past this, claim nothing
        self._unwritten = 0  # held jobs whose thread is done but whose outcome is not written
        self.jobs_done = 0  # attempts run (a retried job counts once per attempt)
        self.mean_duration = None  # moving average of recent jobs' run time, seconds
        # SimpleQueue: put/get in C, without queue.Queue's conditions; one hand-off per job.
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._held: dict = {}  # claim_of(job): HeldJob
        self._lock = threading.Lock()
        # Shut while the database is unreachable: the threads start no held job meanwhile.
        self.gate = DatabaseGate(alias)
        # The gate's trouble count up to which the held claims were read back: one reading per
        # trouble for the whole pool, the threads that saw it waiting for it (drop_lost_claims).
        self._claims_checked_at = self.gate.trouble
        self._checking_claims = threading.Lock()
        self._stopped = threading.Event()
        self._threads = [
            threading.Thread(target=self._work, name=f"sqlqueue-job-{n}", daemon=True)
            for n in range(size)
        ]

    def start(self):
        for started, thread in enumerate(self._threads):
            try:
                thread.start()
            except RuntimeError as exc:  # "can't start new thread": a system or container limit
                # The threads already started wait on an empty inbox; the process exits with
                # this error, daemon threads and all. (Stopping them would make each exit, and a
                # thread's exit may need memory the system just refused.)
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
        """Jobs the fetcher may claim now. A job whose outcome waits for the writer takes no
        slot (its thread is free) until ``max_backlog`` of them wait: then none is free, and
        while the database refuses writes the worker claims nothing more."""
        capacity = self.capacity()
        with self._lock:
            if self._unwritten >= self.max_backlog:
                return 0
            return capacity - (len(self._held) - self._unwritten)

    def unwritten(self) -> int:
        """Outcomes waiting for the writer (their jobs still held, their leases renewed)."""
        with self._lock:
            return self._unwritten

    def held(self) -> list:
        with self._lock:
            return list(self._held.values())

    def busy(self) -> list:
        """Held jobs still worth waiting for at shutdown: running, or their outcome unwritten
        (a timed-out job's outcome is the timeout's)."""
        with self._lock:
            return [entry for entry in self._held.values()
                    if not entry.timed_out or not entry.written]

    def is_idle(self) -> bool:
        with self._lock:
            return not self._held

    def submit(self, job) -> None:
        with self._lock:
            self._held[claim_of(job)] = HeldJob(job, claimed_at=time.monotonic())
        self._inbox.put(job)

    def take_waiting(self, longer_than: float) -> list:
        """Withdraw the jobs that have waited for a thread longer than ``longer_than`` seconds
        (the caller releases them); a thread that later takes one from the inbox skips it, even
        if the row is held again by a new claim by then."""
        if not self.gate.is_open():
            return []  # they wait for the database, not for a thread: keep them
        cutoff = time.monotonic() - longer_than
        with self._lock:
            stale = [key for key, entry in self._held.items()
                     if entry.started_at is None and entry.claimed_at < cutoff]
            return [self._held.pop(key).job for key in stale]

    def take_unstarted(self) -> list:
        """Remove the jobs no thread has started yet (for release at shutdown); a claim
        withdrawn earlier is not taken again."""
        taken = []
        while True:
            try:
                job = self._inbox.get_nowait()
            except queue.Empty:
                break
            if job is None:
                continue
            with self._lock:
                if self._held.pop(claim_of(job), None) is None:
                    continue
            taken.append(job)
        return taken

    def drop_lost_claims(self, trouble: int) -> list:
        """Read back the claims of the held jobs not started yet and withdraw those the database
        no longer gives to this worker (``claim.held.still_held``); returns the jobs dropped,
        which are not this worker's to start or release. Once per ``trouble`` (the gate's count
        when the caller saw it): a thread that comes with a count already read back returns at
        once, after any reading under way. The database's errors propagate."""
        with self._checking_claims:
            if trouble <= self._claims_checked_at:
                return []
            with self._lock:
                waiting = [key for key, entry in self._held.items() if entry.started_at is None]
            kept = (set(waiting) if self.worker_id is None else
                    still_held(Job.objects.using(self.alias), self.worker_id, waiting))
            with self._lock:
                lost = [self._held.pop(key).job for key in waiting
                        if key not in kept and key in self._held
                        and self._held[key].started_at is None]
            self._claims_checked_at = trouble
        for job in lost:
            logger.warning(
                "claim lost while the database was in trouble, job not started task=%s id=%s "
                "attempt=%s", job.task_name, job.pk, job.attempts,
                extra=fields("job.claim_lost", task=job.task_name, job_id=job.pk,
                             attempt=job.attempts))
        if lost:
            self.on_slot_free()  # their slots are free: the fetcher may claim again
        return lost

    def time_out(self, entry: "HeldJob", outcome) -> None:
        """Fail a job past its deadline (the heartbeat's call): its outcome is written now, and
        the late one of its thread, if the thread ever returns, is dropped."""
        with self._lock:
            if entry.timed_out or entry.ran:  # its own outcome is already on its way
                return
            entry.timed_out = True
        self.writer.submit(entry.job, outcome)

    def outcome_written(self, job, outcome, applied: bool) -> None:
        """The writer's callback: the job is no longer held once its thread is done too."""
        with self._lock:
            entry = self._held.get(claim_of(job))
            backlog_was_full = self._unwritten >= self.max_backlog
            if entry is not None:
                entry.written = True
                if entry.ran:
                    self._forget(entry)
        self.on_result(report(job, outcome, applied))
        if backlog_was_full:
            self.on_slot_free()  # claims stopped at the cap: they may go on

    def _forget(self, entry) -> None:
        """No longer held (under the lock)."""
        del self._held[claim_of(entry.job)]
        if entry.awaits_writer:
            self._unwritten -= 1

    def stop(self, *, wait: float | None = None):
        """Let every thread end once the jobs before it in the inbox are done; ``wait``: seconds
        to wait for them."""
        self._stopped.set()
        for _ in self._threads:
            self._inbox.put(None)
        if wait is not None:
            for thread in self._threads:
                thread.join(wait)

    # ---- the job threads -------------------------------------------------------------------
    def _work(self):
        checked = self.gate.trouble
        while True:
            self.gate.wait(self._stopped.is_set)  # no job starts while the database is gone
            job = self._inbox.get()
            if job is None:
                connections.close_all()  # this thread's own connections
                return
            if self.gate.trouble != checked:  # a connection broke somewhere: is this one's?
                checked = self._after_trouble()
            try:
                self._run(job)
            except BaseException:  # never lose a thread; the lease brings the job back
                logger.exception("job thread failed around job id=%s", job.pk)
                with self._lock:
                    entry = self._held.get(claim_of(job))
                    if entry is not None:
                        self._forget(entry)
                self.on_slot_free()

    def _after_trouble(self) -> int:
        """Before this thread's next job, once the database was in trouble: its own connections
        checked, and the held claims read back (``drop_lost_claims``; the job in hand may be
        among those dropped, and ``_run`` then skips it). Returns the trouble count this covers.
        While the database does not answer, waits at the gate and tries again."""
        while True:
            trouble = self.gate.trouble
            check_connections()
            try:
                self.drop_lost_claims(trouble)
                return trouble
            except TRANSIENT:
                drop_connection(self.alias)
                self.gate.close("reading back the held claims failed")
                if not self.gate.wait(self._stopped.is_set):
                    # Shutting down with the database gone: the job in hand runs unchecked, as
                    # any did before this reading (its first query fails: an interruption).
                    return trouble
            except Exception:  # never lose a thread to the reading: the job runs unchecked
                logger.exception("reading back the held claims failed")
                return trouble

    def _run(self, job):
        with self._lock:
            entry = self._held.get(claim_of(job))
            if entry is None:  # withdrawn before it started (shutdown, waited too long)
                return
            entry.started_at = time.monotonic()
            timeout = job.timeout_seconds or self.default_timeout
            entry.deadline = entry.started_at + timeout if timeout else None
        tidy_connections()  # replaces broken ones; honours CONN_MAX_AGE > 0
        metrics.job_started(job)
        try:
            outcome = runner.run(job)
        finally:
            metrics.job_ran(job)
        if outcome.kind == runner.OutcomeKind.INTERRUPTED:
            self.gate.close(f"job {job.pk}'s run was interrupted")
        self._record_duration(outcome.duration_seconds)
        with self._lock:
            self.jobs_done += 1
            entry.ran = True
            done = entry.written  # timed out, and the timeout already written
            if done:
                self._forget(entry)
            elif not entry.timed_out:
                entry.awaits_writer = True
                self._unwritten += 1
        if entry.timed_out:
            # The heartbeat failed this attempt; this late outcome is dropped (fenced anyway).
            logger.warning(
                "job finished after its timeout task=%s id=%s attempt=%s duration_ms=%.1f",
                job.task_name, job.pk, job.attempts, outcome.duration_seconds * 1000,
                extra=fields("job.finished_late", task=job.task_name, job_id=job.pk,
                             attempt=job.attempts,
                             duration_ms=round(outcome.duration_seconds * 1000, 1)),
            )
            if done:
                self.on_slot_free()
            return
        self.on_slot_free()  # the thread is free: the fetcher may claim for it
        self.writer.submit(job, outcome)  # held (and its lease renewed) until written

    def _record_duration(self, seconds: float) -> None:
        previous = self.mean_duration
        self.mean_duration = seconds if previous is None else 0.9 * previous + 0.1 * seconds
