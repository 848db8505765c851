"""The jobs this process holds, and where each claimed job runs: on a job thread
(``job_threads.py``) or, async, on the event loop (``event_loop.py``).

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
held jobs not started yet are read back before the next one starts, and those whose claims were
lost are dropped (``lost_claims.py``).
"""

import logging
import math
import threading
import time
from dataclasses import dataclass

from ..run import runner
from ..run.execution import report
from .event_loop import EventLoop
from .job_threads import JobThreads
from .log_format import fields
from .lost_claims import LostClaims
from .outcome_writer import OutcomeWriter
from .resilience import DatabaseGate

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
#: With an event loop, a claim asks for the free async slots times the share of async jobs
#: among the jobs recently claimed (a moving average, this weight per job), plus the free thread
#: slots times the share of sync jobs (see ``Pool.free_slots``).
ASYNC_SHARE_WEIGHT = 0.05


def claim_of(job) -> tuple:
    """What a held job is known by: its id and the token of its claim (``Job.claim_token``)."""
    return job.pk, job.claim_token


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
    on_loop: bool = False  # an async job, run on the event loop (worker/event_loop.py)
    loop_slot: bool = False  # counted in Pool._on_loop: it takes an async slot
    task: object = None  # its asyncio.Task, once the loop started it


def split_free_slots(capacity: int, running: int, on_loop: int, async_size: int,
                     share: float) -> int:
    """The free slots of a pool with an event loop: ``capacity`` for the threads, ``async_size``
    on the loop; ``running``: the jobs held whose outcome does not wait for the writer, ``on_loop``
    of them taking an async slot;
    ``share``: the share of async jobs among recent claims.

    There are two kinds of slot, and a claim cannot tell which kind a job needs before it has
    it. It asks for the free slots of each kind weighed by the share of that kind among recent
    claims: all async jobs lately, it fills the async slots; all sync (or no async job yet), the
    threads, exactly as without a loop. The sync side is rounded up, so a worker of async jobs
    still finds a sync one; the async side asks for one job at least while the threads are full,
    so that async jobs still flow then. A job of a kind whose slots are full waits, claimed
    ahead: a sync job in the inbox for a thread, an async one on the loop for an async slot (both
    released after ``CLAIMED_AHEAD_MAX_WAIT``), and meanwhile takes a slot of the other kind, so
    that the jobs held never exceed the threads' capacity plus the async slots."""
    sync_held = running - on_loop
    free_sync = capacity - sync_held - max(0, on_loop - async_size)
    free_async = async_size - on_loop - max(0, sync_held - capacity)
    sync_part = math.ceil(max(0, free_sync) * (1 - share))
    async_part = round(max(0, free_async) * share)
    if share and not sync_part and free_async > 0:
        async_part = max(1, async_part)
    return sync_part + async_part


class Pool:
    def __init__(self, size: int, *, alias: str, default_timeout, on_slot_free, writer=None,
                 on_result=None, max_backlog: int = MAX_UNWRITTEN, worker_id: str | None = None,
                 async_size: int = 0, block_warning_seconds: float = 0.5):
        self.size = size
        # Async jobs at once on the event loop, beside the threads; 0: async jobs run on the
        # threads (async_to_sync), one per thread, as sync jobs do.
        self.async_size = async_size
        self._on_loop = 0  # held jobs that take an async slot (started or about to be)
        self.async_share = 0.0  # moving average of the share of async jobs claimed
        self.alias = alias
        # Whose claims the held jobs are, to read them back after trouble (lost_claims.py);
        # None: not read back (a pool driven by a test without a worker).
        self.worker_id = worker_id
        self.default_timeout = default_timeout
        self.on_slot_free = on_slot_free
        # Writes every outcome; a job stays held until its outcome is written, which the writer
        # tells the pool (outcome_written): the pool is its writer's one listener.
        self.writer = writer or OutcomeWriter(alias=alias, batched=False)
        self.writer.on_written = self.outcome_written
        self.on_result = on_result or (lambda result: None)  # each written job's RunResult
        self.max_backlog = max_backlog  # ran, outcome unwritten: past this, claim nothing
        self._unwritten = 0  # held jobs whose thread is done but whose outcome is not written
        self.jobs_done = 0  # attempts run (a retried job counts once per attempt)
        self.mean_duration = None  # moving average of recent jobs' run time, seconds
        self._held: dict = {}  # claim_of(job): HeldJob
        self._lock = threading.Lock()
        # Shut while the database is unreachable: the threads start no held job meanwhile.
        self.gate = DatabaseGate(alias)
        self.lost_claims = LostClaims(self)  # read back after trouble
        self.stopped = threading.Event()
        self.threads = JobThreads(self, size)
        self.loop = (EventLoop(self, block_warning_seconds=block_warning_seconds)
                     if async_size else None)

    def start(self):
        if self.loop is not None:
            self.loop.start()
        self.threads.start()

    # ---- what the fetcher and heartbeat see ------------------------------------------------
    def capacity(self) -> int:
        """How many jobs to hold: the threads, plus as many claimed ahead while jobs are short."""
        short = self.mean_duration is not None and self.mean_duration < SHORT_JOB_SECONDS
        return CLAIM_AHEAD_PER_THREAD * self.size if short else self.size

    def free_slots(self) -> int:
        """Jobs the fetcher may claim now. A job whose outcome waits for the writer takes no
        slot (its thread is free) until ``max_backlog`` of them wait: then none is free, and
        while the database refuses writes the worker claims nothing more. With an event loop,
        the free slots of each kind, weighed (``split_free_slots``)."""
        capacity = self.capacity()
        with self._lock:
            if self._unwritten >= self.max_backlog:
                return 0
            running = len(self._held) - self._unwritten
            if not self.async_size:
                return capacity - running
            on_loop, share = self._on_loop, self.async_share
        return split_free_slots(capacity, running, on_loop, self.async_size, share)

    def runs_on_loop(self, job) -> bool:
        """Whether this claim of ``job`` runs on the event loop (its task can be cancelled)."""
        with self._lock:
            entry = self._held.get(claim_of(job))
            return entry is not None and entry.on_loop

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

    def abandoned(self) -> list:
        """Held jobs given up on (timed out, or cancelled past their grace) whose outcome is
        written while their thread has not returned: nothing is left to wait for but the
        thread, which only the process's exit can stop."""
        with self._lock:
            return [entry for entry in self._held.values()
                    if entry.timed_out and entry.written and not entry.ran]

    def submit(self, job) -> None:
        if self.loop is None:
            with self._lock:
                self._held[claim_of(job)] = HeldJob(job, claimed_at=time.monotonic())
            self.threads.submit(job)
            return
        on_loop = runner.runs_on_loop(job)
        entry = HeldJob(job, claimed_at=time.monotonic(), on_loop=on_loop, loop_slot=on_loop)
        with self._lock:
            self._held[claim_of(job)] = entry
            self._on_loop += on_loop
            self.async_share += ASYNC_SHARE_WEIGHT * (on_loop - self.async_share)
        if on_loop:
            self.loop.submit(entry)
        else:
            self.threads.submit(job)

    def take_waiting(self, longer_than: float) -> list:
        """Withdraw the jobs that have waited for a thread longer than ``longer_than`` seconds
        (the caller releases them); a thread that later takes one from the inbox skips it, even
        if the row is held again by a new claim by then."""
        if not self.gate.is_open():
            return []  # they wait for the database, not for a thread: keep them
        cutoff = time.monotonic() - longer_than
        with self._lock:
            stale = [entry for entry in self._held.values()
                     if entry.started_at is None and entry.claimed_at < cutoff]
            for entry in stale:
                self._forget(entry)
            return [entry.job for entry in stale]

    def take_unstarted(self) -> list:
        """Remove the jobs no thread has started yet (for release at shutdown); a claim
        withdrawn earlier is not taken again."""
        taken = []
        for job in self.threads.take_unstarted():
            with self._lock:
                if self._held.pop(claim_of(job), None) is None:
                    continue
            taken.append(job)
        with self._lock:  # async jobs waiting on the loop for a slot
            waiting = [entry for entry in self._held.values()
                       if entry.on_loop and entry.started_at is None]
            for entry in waiting:
                self._forget(entry)
        return taken + [entry.job for entry in waiting]

    def time_out(self, entry: "HeldJob", outcome) -> None:
        """Fail a job past its deadline (the heartbeat's call): its outcome is written now, and
        the late one of its thread, if the thread ever returns, is dropped."""
        with self._lock:
            if entry.timed_out or entry.ran:  # its own outcome is already on its way
                return
            entry.timed_out = True
        self.writer.submit(entry.job, outcome)
        if entry.on_loop:
            self.loop.cancel(entry)  # CancelledError at the job's next await

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
        if entry.loop_slot:
            entry.loop_slot = False
            self._on_loop -= 1

    def stop(self, *, wait: float | None = None):
        """Let every thread end once the jobs before it in the inbox are done; ``wait``: seconds
        to wait for them."""
        self.stopped.set()
        self.threads.stop()
        if self.loop is not None:
            self.loop.stop(wait=wait)
        if wait is not None:
            self.threads.join(wait)

    def begin(self, job) -> HeldJob | None:
        """A thread or the loop starts ``job``: its entry, with its deadline, or None if it
        was withdrawn meanwhile."""
        with self._lock:
            entry = self._held.get(claim_of(job))
            if entry is None:
                return None
            entry.started_at = time.monotonic()
            timeout = job.timeout_seconds or self.default_timeout
            entry.deadline = entry.started_at + timeout if timeout else None
        return entry

    def finish(self, entry: HeldJob, outcome, *, written: bool | None = None) -> None:
        """A thread or the loop is done with a job: its outcome goes to the writer (unless the
        job timed out meanwhile, or ``written`` says whether it was written already: a
        transactional job's success), its slot is free."""
        job = entry.job
        if outcome.kind == runner.OutcomeKind.INTERRUPTED:
            self.gate.close(f"job {job.pk}'s run was interrupted")
        if not entry.on_loop:  # how soon threads free up: async jobs say nothing of that
            self._record_duration(outcome.duration_seconds)
        with self._lock:
            self.jobs_done += 1
            entry.ran = True
            if entry.loop_slot:
                entry.loop_slot = False
                self._on_loop -= 1
            done = entry.written  # timed out, and the timeout already written
            if done:
                self._forget(entry)
            elif not entry.timed_out:
                entry.awaits_writer = True
                self._unwritten += 1
            # No other job is running or waiting to start: no outcome will come to share this
            # one's write within the writer's interval.
            alone = len(self._held) == self._unwritten
        if entry.timed_out:
            _log_finished_late(job, outcome)
            if done:
                self.on_slot_free()
            return
        self.on_slot_free()  # the thread is free: the fetcher may claim for it
        if written is None:  # held (and its lease renewed) until written
            self.writer.submit(job, outcome, at_once=alone)
        else:
            self.outcome_written(job, outcome, written)

    def count_attempt(self) -> None:
        """An attempt run outside the pool (a transactional lane's), counted with its own."""
        with self._lock:
            self.jobs_done += 1

    def forget(self, job) -> None:
        """Drop a held job whose thread or task failed around it (the lease brings it back)."""
        with self._lock:
            entry = self._held.get(claim_of(job))
            if entry is not None:
                self._forget(entry)
        self.on_slot_free()

    def _record_duration(self, seconds: float) -> None:
        previous = self.mean_duration
        self.mean_duration = seconds if previous is None else 0.9 * previous + 0.1 * seconds


def _log_finished_late(job, outcome) -> None:
    """The heartbeat failed this attempt; this late outcome is dropped (fenced anyway)."""
    logger.warning(
        "job finished after its timeout task=%s id=%s attempt=%s duration_ms=%.1f",
        job.task_name, job.pk, job.attempts, outcome.duration_seconds * 1000,
        extra=fields("job.finished_late", task=job.task_name, job_id=job.pk,
                     attempt=job.attempts, duration_ms=round(outcome.duration_seconds * 1000, 1)),
    )
