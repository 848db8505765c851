"""One worker process: claim jobs into free slots, run them on a thread pool, stop gracefully.

Threads: the main thread fetches (claims) and handles signals; ``concurrency`` job threads run
jobs; one thread sends heartbeats, one runs maintenance, and on PostgreSQL one LISTENs.
"""

import datetime as dt
import logging
import os
import signal
import sys
import threading
import time

from django.db import router
from django.utils import timezone

from ..claim.bounded import ClaimBound
from ..claim.limited import QueueControls, read_controls
from ..conf import get_settings
from ..db import outages
from ..db.clock import DatabaseNow
from ..models import Job, Worker
from ..run import progress
from ..telemetry import metrics
from . import identity, shutdown
from .cancels import CancelWatcher
from .config import WorkerConfig
from .heartbeat import Heartbeat
from .maintenance.service import Maintenance
from .outcome_writer import OutcomeWriter
from .pool import CLAIMED_AHEAD_MAX_WAIT, Pool
from .reporting import OutcomeTally, WorkerReporting, resident_memory_mb
from .resilience import TRANSIENT, Backoff, call_with_retry, drop_connection, run_every
from .scheduler import Scheduler, SchedulerConfig
from .transactional_lane import TransactionalLane, left_to_the_claim
from .wakeup import Wakeup

logger = logging.getLogger(__name__)
RECYCLE_EXIT_CODE = 75  # EX_TEMPFAIL: "restart me" to the supervisor
#: The longest the transactional lane waits after a step that found less than a batch.
LANE_POLL_SECONDS = 0.05


class WorkerProcess(WorkerReporting):
    def __init__(self, config: WorkerConfig, *, out=None):
        self.config = config
        self.out = out or sys.stdout
        self.alias = config.database or router.db_for_write(Job)
        self.worker_id = config.worker_id()
        self.stopping = threading.Event()  # stop claiming
        self.signalled = False  # stopping because of SIGTERM/SIGINT: never recycle then
        self.finished = threading.Event()  # every held job is done or released: stop beating
        self.recycle_reason = None  # set once the process should exit and be replaced
        self.draining = None  # why it stopped claiming before a recycle
        self.parent_pid = os.getppid()
        self.claimed_total = 0
        self.claimed_full_batch = False  # the last claim got all it asked for: claim again
        settings = get_settings()
        # Claims after the last claimed job while full claims are slow (a long transaction).
        self.claim_bound = ClaimBound(settings.SLOW_CLAIM_SECONDS,
                                      settings.FULL_CLAIM_INTERVAL_SECONDS)
        self._last_status = time.monotonic()  # --burst reads its status every 2 s
        self._burst_status = None  # and prints it when it changed
        self.cancels_due = threading.Event()  # look for cancelled jobs now (a NOTIFY)
        self.wakeup = Wakeup(
            alias=self.alias, queues=config.queues, poll_interval=config.poll_interval,
            use_notify=config.notify, on_cancel=self.cancels_due.set,
        )
        self.outcomes = OutcomeTally()
        self.writer = OutcomeWriter(
            alias=self.alias, outcome_deadline=10 * config.lease_seconds,
            on_written=lambda job, outcome, applied: self.pool.outcome_written(
                job, outcome, applied),
        )
        self.pool = Pool(
            config.concurrency, alias=self.alias, default_timeout=config.default_timeout,
            on_slot_free=self.wakeup.poke, writer=self.writer, on_result=self._finished,
            worker_id=self.worker_id,
            async_size=config.async_concurrency,
            block_warning_seconds=config.block_warning_seconds,
        )
        self.heartbeat = Heartbeat(
            worker_id=self.worker_id, alias=self.alias, pool=self.pool,
            lease_seconds=config.lease_seconds, on_timeout=self._job_timed_out,
            on_missing_row=self._register,
        )
        self.cancels = CancelWatcher(
            alias=self.alias, pool=self.pool, grace_seconds=config.cancel_grace,
            on_stopped=self._job_cancelled,
        )
        self.maintenance = Maintenance(
            alias=self.alias, lease_seconds=config.lease_seconds,
            keep_succeeded=config.keep_succeeded, keep_failed=config.keep_failed,
            worker_id=self.worker_id,
        )
        self.scheduler = (Scheduler(SchedulerConfig(holder=self.worker_id), alias=self.alias)
                          if config.scheduler else None)
        self.schedules_synced = None  # operations.SyncResult of the sync at start
        # Transactional jobs, with --transactional-batch: run by the lane, not claimed here.
        self.lanes = [TransactionalLane(alias=self.alias, worker_id=self.worker_id,
                                        batch=config.transactional_batch, queues=config.queues,
                                        on_result=self._lane_finished)
                      for _ in range(config.transactional_lanes if config.transactional_batch
                                     else 0)]
        # The paused and limited queues (claim/limited.py), read again once per poll interval:
        # that is how soon every worker follows a pause, a resume or a new limit.
        self.controls = QueueControls(read_at=-float("inf"))

    # ---- life cycle --------------------------------------------------------------------
    def run(self) -> int:
        """Work until stopped (signal, --burst drained, recycle). Returns the exit code."""
        # First, before anything is registered or claimed: the system may refuse the threads.
        self.pool.start()
        self._install_signal_handlers()
        call_with_retry(self._register, alias=self.alias, what="registering the worker",
                        stop=self.stopping.is_set)
        if self.scheduler is not None:
            # The schedules of this code into the table, before the first tick.
            self.schedules_synced = call_with_retry(
                self.scheduler.sync, alias=self.alias, what="syncing the schedules",
                stop=self.stopping.is_set)
        metrics.worker_started(self.config.concurrency)  # before the banner says it works
        self._print_banner()
        self.wakeup.start()
        self.writer.start()
        # Heartbeats go on through a graceful shutdown, so running jobs keep their leases.
        # A failed beat is tried again within half an interval, never later: with the usual
        # backoff (up to 10 s), a beat that failed a few times in a row outlived the leases it
        # renews (5 s in the chaos suite), and the held jobs were rescued from a live worker,
        # each rescue an interruption (a MariaDB chaos run of killed connections used up a
        # job's three).
        self._every(self.config.heartbeat_interval, self.heartbeat.run_once, "heartbeat",
                    until=self.finished, max_delay=self.config.heartbeat_interval / 2)
        # The progress jobs report (run/progress.py): one write per interval for all of them,
        # and no query at all while none reports.
        self._every(get_settings().PROGRESS_INTERVAL_SECONDS, progress.board.flush, "progress",
                    until=self.finished, keep_connection=True)
        threading.Thread(target=self.cancels.watch, name="sqlqueue-cancels", daemon=True,
                         kwargs={"until": self.finished, "due": self.cancels_due,
                                 "interval": self.config.heartbeat_interval}).start()
        self._every(self.config.maintenance_interval, self._maintain, "maintenance",
                    until=self.stopping)
        if self.scheduler is not None:
            self._every(self.config.scheduler_interval, self.scheduler.run_once, "scheduler",
                        until=self.stopping, keep_connection=True)
        lanes = [threading.Thread(target=lane.run, name=f"sqlqueue-lane-{n}", daemon=True,
                                  kwargs={"until": self.stopping,
                                          "poll_interval": min(self.config.poll_interval,
                                                               LANE_POLL_SECONDS)})
                 for n, lane in enumerate(self.lanes)]
        for lane in lanes:
            lane.start()
        try:
            self._fetch_loop()
        finally:
            self.stopping.set()
            deadline = time.monotonic() + self.config.shutdown_timeout
            for lane in lanes:  # each one's batch commits (bounded by its jobs' time limits)
                lane.join(max(0.0, deadline - time.monotonic()))
            self._shut_down()
        return self.exit_code()

    def exit_code(self) -> int:
        """75 to be replaced by a fresh process, 0 otherwise. A signal wins over a recycle
        decided just before it: a worker asked to stop must not start again."""
        if self.recycle_reason and not self.signalled:
            self._say(f"recycling: {self.recycle_reason}", "worker.recycling",
                      reason=self.recycle_reason)
            return RECYCLE_EXIT_CODE
        return 0

    def _fetch_loop(self):
        backoff = Backoff()
        while True:
            try:
                if not self.step():
                    return
                backoff.reset()
            except TRANSIENT as exc:
                drop_connection(self.alias)
                self.pool.gate.suspect()  # the job threads' connections may be broken too
                if outages.reachable(self.alias):
                    # A new connection answers: the claim's was ended (an operator, a failover
                    # terminating backends), not the database. The next claim comes after the
                    # first delay: doubled through a run of such ends, the wait had reached 10 s,
                    # and the whole fleet sat idle that long once the database was left alone.
                    backoff.reset()
                else:
                    self.pool.gate.close("a claim failed")
                delay = backoff.next_delay()
                logger.warning("database unavailable while claiming (%s); retrying in %.1fs",
                               str(exc).strip().splitlines()[0] if str(exc).strip() else exc,
                               delay)
                self.stopping.wait(delay)
                continue
            if self.claimed_full_batch and self.pool.free_slots() > 0:
                continue  # there may be more ready jobs
            # A claim that found fewer jobs than it asked for emptied the queue (for now): wait
            # for a NOTIFY, a freed slot or the poll, instead of a claim that finds nothing while
            # the jobs just claimed start. While claims are bounded, no longer than until the
            # next full claim is due: that is what bounds the wait of a job sorted before it.
            self.wakeup.wait(at_most=self.claim_bound.seconds_until_full(time.monotonic()))

    def step(self, clock=time.monotonic) -> bool:
        """One turn of the fetcher: claim into the free slots, then decide whether to go on.
        False once the process should stop (a signal, a recycle, --burst done, no supervisor).
        Tests call it directly."""
        if self.stopping.is_set() or self.recycle_reason:
            return False
        claimed = self._claim()
        if self.wakeup.peers_due():
            # How many workers share a NOTIFY with this one (worker/wakeup.py, Claimers); after
            # the claim, so that it never delays one.
            self.wakeup.set_peers(
                Worker.objects.using(self.alias).values_list("queues", flat=True))
        self._check_recycle()
        if self.recycle_reason:
            return False
        if self.config.supervised and os.getppid() != self.parent_pid:
            self._say("the supervisor is gone: stopping", "worker.orphaned", level="warning")
            return False
        if self.config.burst:
            if clock() - self._last_status >= 2:
                self._print_burst_status()
                self._last_status = clock()
            if not claimed and self._burst_done():
                self._print_burst_status()
                self._say("burst: nothing left to do, exiting", "worker.drained")
                return False
        return True

    def _burst_done(self) -> bool:
        """Nothing held is worth waiting for, and no job is due (or none could start: every
        thread is stuck). A thread stuck in a job past its time limit or its cancel's grace
        (the job's outcome already written) is not waited for, as a SIGTERM does not wait for
        it: the exit abandons it, and says so."""
        if self.pool.busy():
            return False
        if self.pool.free_slots() > 0 and self._due_soon():
            return False
        self._say_abandoned(self.pool.abandoned())
        return True

    def _claim(self) -> list:
        self.claimed_full_batch = False
        for job in self.pool.take_waiting(longer_than=CLAIMED_AHEAD_MAX_WAIT):
            self._release(job)  # claimed ahead, but the threads are busy with long jobs
        if self.draining:
            return []
        self._gather_free_slots()
        free = self.pool.free_slots()
        if self.config.max_jobs is not None:
            free = min(free, self.config.max_jobs - self.claimed_total)
        if free <= 0:
            return []
        controls = self._controls()
        started = time.monotonic()
        # Paused or limited queues are claimed their own way (claim/limited.py), always in full.
        after = self.claim_bound.bound(started) if controls.unused else None
        claimable = Job.objects.using(self.alias)
        if self.lanes:
            claimable = left_to_the_claim(claimable, controls)
        jobs = claimable.claim(
            self.config.queues, self.worker_id, limit=free, lease=self.config.lease_seconds,
            controls=controls, after=after,
        )
        self.claim_bound.claimed(jobs, bounded=after is not None,
                                 seconds=time.monotonic() - started, now=started)
        self.claimed_full_batch = len(jobs) == free
        if jobs:
            self.wakeup.found_jobs()
        for job in jobs:
            self.pool.submit(job)
        self.claimed_total += len(jobs)
        return jobs

    def _controls(self) -> QueueControls:
        if time.monotonic() - self.controls.read_at >= self.config.poll_interval:
            self.controls = read_controls(Job, self.alias)
        return self.controls

    def _gather_free_slots(self, wait=0.01):
        """With only a few slots free and jobs still running, wait a moment for more: one claim
        for several jobs costs one commit instead of several. Idle workers claim at once."""
        half = max(1, self.pool.capacity() // 2)
        deadline = time.monotonic() + wait
        while 0 < self.pool.free_slots() < half and time.monotonic() < deadline:
            time.sleep(0.001)

    def _due_soon(self) -> bool:
        """Burst mode waits for retries and scheduled jobs due within one poll interval."""
        horizon = timezone.now() + dt.timedelta(seconds=self.config.poll_interval)
        return (Job.objects.using(self.alias).ready(horizon).in_queues(self.config.queues)
                .exclude(queue__in=list(self._controls().paused)).exists())

    def _check_recycle(self):
        """Past a limit, stop claiming; once the running jobs are done, recycle."""
        if not self.draining:
            if self.config.max_jobs is not None and self.claimed_total >= self.config.max_jobs:
                self.draining = f"ran {self.claimed_total} jobs (--max-jobs)"
            limit = self.config.max_memory_mb
            # Only after some work: a process that starts above the limit must not loop.
            if limit is not None and self.pool.jobs_done:
                rss = resident_memory_mb()
                if rss > limit:
                    self.draining = f"resident memory {rss:.0f} MB > {limit:g} MB (--max-memory)"
        if self.draining and not self.pool.busy():
            self.recycle_reason = self.draining

    def _finished(self, result) -> None:
        """Each attempt whose outcome was written (or lost), as execution.RunResult."""
        self.outcomes.add(result)
        metrics.job_finished(result.job, result.outcome, result.duration_seconds)

    def _lane_finished(self, result) -> None:
        """A transactional lane's attempt, committed: counted as the pool's are (heartbeats
        report them to the autoscaler), then as any outcome."""
        self.pool.count_attempt()
        self._finished(result)

    def _maintain(self):
        metrics.jobs_rescued(self.maintenance.run_once().rescued)

    def _job_timed_out(self, job):
        self._job_stopped(job, "timed out")

    def _job_cancelled(self, job):
        self._job_stopped(job, "was cancelled")

    def _job_stopped(self, job, what):
        """A job past its timeout, or cancelled and past its grace period, was given up on;
        its thread may still be running it (an async job's task was cancelled instead)."""
        if self.config.supervised and not self.pool.runs_on_loop(job):
            # Only a new process can stop the stuck thread: finish the others, then exit.
            self.draining = f"job {job.pk} {what} and its thread cannot be stopped"
            self.wakeup.poke()

    def _shut_down(self):
        shutdown.shut_down(self)

    def _release(self, job, *, running=False):
        shutdown.release(self, job, running=running)

    # ---- helpers -----------------------------------------------------------------------
    def _register(self):
        # By the database's clock, as heartbeats write and maintenance reads it; with what
        # proves which process table the pid belongs to (worker/identity.py), and the lease
        # the reaper judges this worker's silence by.
        table = identity.current()
        Worker.objects.using(self.alias).create(
            name=self.worker_id, host=self.config.host, pid=os.getpid(),
            queues=self.config.queues or [], concurrency=self.config.concurrency,
            started_at=DatabaseNow(), last_heartbeat_at=DatabaseNow(),
            boot_id=table.boot_id, pid_namespace=table.pid_namespace,
            lease_seconds=self.config.lease_seconds, version=get_settings().VERSION,
        )

    def _every(self, seconds, step, name, *, until, keep_connection=False, max_delay=10.0):
        """Run ``step`` every ``seconds`` on a thread of its own, until ``until`` is set
        (``resilience.run_every``)."""
        run_every(seconds, step, name, alias=self.alias, until=until,
                  keep_connection=keep_connection, max_delay=max_delay, logger=logger)

    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return  # e.g. run from a test thread; the caller stops us via .stopping

        if self.config.supervised:
            # The supervisor owns Ctrl-C and the "second signal" (it then kills us). A child
            # gets signals twice (from the terminal or systemd, and from the supervisor): the
            # repeats must not cut its graceful shutdown short.
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        def handle(signum, frame):
            if self.stopping.is_set():
                if self.config.supervised:
                    return
                self._say("second signal: exiting now; leases will rescue running jobs",
                          "worker.killed", level="warning", signal=signal.Signals(signum).name)
                os._exit(1)
            self._say(f"{signal.Signals(signum).name}: stopping; running jobs may finish",
                      "worker.stopping", signal=signal.Signals(signum).name)
            self.signalled = True
            self.stopping.set()
            self.wakeup.poke()

        signal.signal(signal.SIGTERM, handle)
        if not self.config.supervised:
            signal.signal(signal.SIGINT, handle)
