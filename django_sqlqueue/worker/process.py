"""One worker process: claim jobs into free slots, run them on a thread pool, stop gracefully.

Threads: the main thread fetches (claims: ``fetcher.py``) and handles signals; ``concurrency``
job threads run jobs; one thread sends heartbeats, one runs maintenance, and on PostgreSQL one
LISTENs.
"""

import logging
import os
import signal
import sys
import threading
import time

from django.db import router

from ..conf import get_settings
from ..db.clock import DatabaseNow
from ..models import Job, Worker
from ..run import progress
from ..telemetry import metrics
from . import identity, shutdown
from .cancels import CancelWatcher
from .config import WorkerConfig
from .fetcher import Fetcher
from .heartbeat import Heartbeat
from .maintenance.service import Maintenance
from .outcome_writer import OutcomeWriter
from .pool import Pool
from .reporting import OutcomeTally, WorkerReporting
from .resilience import call_with_retry, run_every
from .scheduler import Scheduler, SchedulerConfig
from .transactional_lane import TransactionalLane
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
        self.cancels_due = threading.Event()  # look for cancelled jobs now (a NOTIFY)
        self.wakeup = Wakeup(
            alias=self.alias, queues=config.queues, poll_interval=config.poll_interval,
            use_notify=config.notify, on_cancel=self.cancels_due.set,
        )
        self.outcomes = OutcomeTally()
        self.writer = OutcomeWriter(alias=self.alias, outcome_deadline=10 * config.lease_seconds)
        self.pool = Pool(
            config.concurrency, alias=self.alias, default_timeout=config.default_timeout,
            on_slot_free=self._slot_freed, writer=self.writer, on_result=self._finished,
            worker_id=self.worker_id,
            async_size=config.async_concurrency,
            block_warning_seconds=config.block_warning_seconds,
        )
        self.heartbeat = Heartbeat(
            worker_id=self.worker_id, alias=self.alias, pool=self.pool,
            lease_seconds=config.lease_seconds, on_timeout=self._job_timed_out,
            on_missing_row=self._register_again,
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
        # The main thread: claims into the pool's free slots, and decides when to stop.
        self.fetcher = Fetcher(config=config, alias=self.alias, worker_id=self.worker_id,
                               pool=self.pool, wakeup=self.wakeup, lanes=self.lanes,
                               stopping=self.stopping, say=self._say)

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
            self.fetcher.run()
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
        reason = self.fetcher.recycle_reason
        if reason and not self.signalled:
            self._say(f"recycling: {reason}", "worker.recycling", reason=reason)
            return RECYCLE_EXIT_CODE
        return 0

    def _slot_freed(self) -> None:
        """The pool's ``on_slot_free``: the fetcher decides whether to claim for it."""
        self.fetcher.slot_freed()

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
            self.fetcher.drain(f"job {job.pk} {what} and its thread cannot be stopped")

    def _shut_down(self):
        shutdown.shut_down(self)

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

    def _register_again(self):
        """The heartbeat found no row: reaped while the database was out of reach. Not once
        the shutdown began: then the shutdown deleted it (a heartbeat late on a loaded machine
        put it back, a worker listed after it had exited)."""
        if not self.stopping.is_set():
            self._register()

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
