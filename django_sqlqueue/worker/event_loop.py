"""The worker's event loop: async jobs run here as tasks, many at once, beside the job threads.

One loop per worker process, on a thread of its own (``sqlqueue-event-loop``). The pool hands
it each claimed async job (``Pool.submit``); the loop starts a task that awaits the job's
function (``runner.arun``) and gives the outcome back to the pool (``Pool.finish``), which sends
it to the outcome writer as a thread's would: the job stays held, and its lease renewed by the
heartbeat, until its outcome is written.

- A time limit is a timer on the loop: at the deadline the job fails with ``JobTimeout`` (as the
  heartbeat would fail it, which also catches a deadline the loop could not keep) and its task is
  cancelled: ``CancelledError`` at its next ``await``. A cancel of the running job cancels the
  task the same way (``run/cancellation.py``).
- Database work: nothing here calls the ORM on the loop. The job's own ORM calls go through
  ``sync_to_async`` (Django's async ORM methods do): by default one thread, whose connections
  the loop tidies between jobs as a job thread does its own and closes at the end.
- A job that blocks the loop (a synchronous call: ``time.sleep``, ``requests``, the sync ORM
  through a path Django does not guard) stops every other async job of the process. A watchdog
  thread sees the loop's ticks stop, finds the job on the loop thread's stack, and logs it; the
  loop logs how long it was blocked once it runs again.
"""

import asyncio
import logging
import sys
import threading
import time

from asgiref.sync import sync_to_async
from django.db import connections

from ..run import runner
from ..telemetry import metrics
from .heartbeat import timed_out
from .log_format import fields
from .resilience import tidy_connections

logger = logging.getLogger(__name__)
#: Seconds between the tidying of the connections of the async jobs' ORM thread (while jobs
#: ran): a thread tidies its own before each job; here one round for many jobs.
TIDY_INTERVAL_SECONDS = 1.0


def off_loop(function):
    """``function`` for the loop: run on the async jobs' ORM thread, as their own calls are."""
    return sync_to_async(function, thread_sensitive=True)


class EventLoop:
    def __init__(self, pool, *, block_warning_seconds: float = 0.5):
        self.pool = pool
        self.block_warning_seconds = block_warning_seconds
        self.loop = asyncio.new_event_loop()
        self._tick_seconds = max(0.01, block_warning_seconds / 4)
        self._ticked_at = time.monotonic()  # the loop's last tick: stale while it is blocked
        self._blocker = None  # (task name, job id) the watchdog found blocking the loop
        self._stopped = threading.Event()
        self._ran_since_tidy = 0
        self._checked = pool.gate.trouble  # the trouble count the loop's jobs were checked to
        self._checking = asyncio.Lock()
        self._tasks: set = set()
        # The frame of each job's coroutine (``_run``) -> its held entry: what the watchdog
        # looks for on the loop thread's stack.
        self._entries: dict = {}
        self._thread = threading.Thread(target=self._serve, name="sqlqueue-event-loop",
                                        daemon=True)
        self._watchdog = threading.Thread(target=self._watch, name="sqlqueue-loop-watchdog",
                                          daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._watchdog.start()

    def submit(self, entry) -> None:
        """Start a held async job (from the fetcher's thread)."""
        self.loop.call_soon_threadsafe(self._start, entry)

    def cancel(self, entry) -> None:
        """Cancel the task of a held job, from any thread (a timeout, or a cancel past its
        grace period: ``Pool.time_out``)."""
        try:
            self.loop.call_soon_threadsafe(self._cancel, entry)
        except RuntimeError:  # the loop is closed: nothing runs any more
            pass

    def stop(self, *, wait: float | None = None) -> None:
        """Cancel the tasks still running (their jobs were released by the shutdown), close the
        connections of the ORM thread, and end the loop's thread."""
        self._stopped.set()
        try:
            self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self._wind_down()))
        except RuntimeError:
            return
        if wait is not None:
            self._thread.join(wait)

    # ---- on the loop -------------------------------------------------------------------
    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        # A job claimed while every async slot is taken waits here, as a sync one waits for a
        # thread (and is released the same way if it waits too long: Pool.take_waiting).
        self._slots = asyncio.Semaphore(self.pool.async_size)
        services = [self.loop.create_task(self._tick()), self.loop.create_task(self._tidy())]
        try:
            self.loop.run_forever()
        finally:
            for task in services:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*services, return_exceptions=True))
            self.loop.close()

    def _start(self, entry) -> None:
        coroutine = self._run(entry)
        frame = coroutine.cr_frame
        task = self.loop.create_task(coroutine, name=f"sqlqueue-job-{entry.job.pk}")
        entry.task = task
        self._tasks.add(task)
        self._entries[frame] = entry

        def done(task):
            self._tasks.discard(task)
            self._entries.pop(frame, None)

        task.add_done_callback(done)

    def _cancel(self, entry) -> None:
        if entry.task is not None:
            entry.task.cancel()

    async def _run(self, entry) -> None:
        pool, job = self.pool, entry.job
        try:
            if not pool.gate.is_open():  # no job starts while the database is gone
                await off_loop(pool.gate.wait)(self._stopped.is_set)
            async with self._slots:
                await self._after_trouble()
                if pool.begin(job) is None:  # withdrawn while it waited (or its claim lost)
                    return
                timer = (self.loop.call_later(entry.deadline - time.monotonic(),
                                              self._time_out, entry)
                         if entry.deadline is not None else None)
                metrics.job_started(job)
                try:
                    outcome = await runner.arun(job)
                finally:
                    metrics.job_ran(job)
                    if timer is not None:
                        timer.cancel()
                self._ran_since_tidy += 1
                await self._to_pool(pool.finish, entry, outcome)
        except BaseException:  # noqa: BLE001 - never lose the slot; the lease brings it back
            logger.exception("event loop failed around job id=%s", job.pk)
            await self._to_pool(pool.forget, job)

    async def _after_trouble(self) -> None:
        """Once the database was in trouble, before the next job starts: as a job thread does
        (``LostClaims.after_trouble``: the ORM thread's connections checked, the held claims read
        back), once for the loop; the jobs that come meanwhile wait for it."""
        if self.pool.gate.trouble == self._checked:
            return
        async with self._checking:
            if self.pool.gate.trouble != self._checked:
                self._checked = await off_loop(self.pool.lost_claims.after_trouble)()

    def _time_out(self, entry) -> None:
        if entry.timed_out or entry.ran:
            return
        self.loop.create_task(self._to_pool(self.pool.time_out, entry, timed_out(entry)))

    async def _to_pool(self, method, *args) -> None:
        """Call a pool method that may write an outcome: at once when the writer batches (it
        only queues the outcome), else on the ORM thread."""
        if self.pool.writer.batched:
            method(*args)
        else:
            await off_loop(method)(*args)

    async def _tick(self) -> None:
        """Mark the time every few milliseconds; a gap is time the loop was blocked. (Nothing
        else is awaited here: a tick that waited for the busy ORM thread would look like a
        blocked loop.)"""
        while True:
            await asyncio.sleep(self._tick_seconds)
            now = time.monotonic()
            blocked = now - self._ticked_at - self._tick_seconds
            self._ticked_at = now
            if blocked >= self.block_warning_seconds:
                self._report_block(blocked)

    async def _tidy(self) -> None:
        """Tidy the ORM thread's connections every TIDY_INTERVAL_SECONDS while jobs ran."""
        while True:
            await asyncio.sleep(TIDY_INTERVAL_SECONDS)
            if self._ran_since_tidy:
                self._ran_since_tidy = 0
                await off_loop(tidy_connections)()

    def _report_block(self, seconds: float) -> None:
        if self._blocker is None:  # no job was seen blocking it: the whole process stalled
            logger.debug("event loop stalled blocked_ms=%.0f", seconds * 1000)
            return
        task, job_id = self._blocker
        self._blocker = None
        logger.warning(
            "async job blocked the event loop task=%s id=%s blocked_ms=%.0f: every async job "
            "of this worker waited meanwhile; await instead of blocking, or make it a sync job",
            task, job_id, seconds * 1000,
            extra=fields("job.blocked_loop", task=task, job_id=job_id,
                         blocked_ms=round(seconds * 1000)))

    async def _wind_down(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        await off_loop(connections.close_all)()  # the ORM thread's connections
        self.loop.stop()

    # ---- the watchdog thread -----------------------------------------------------------
    def _watch(self) -> None:
        """Every tick, look whether the loop's ticks stopped; if so, find the job whose code
        runs on the loop's thread now, once per block, and warn at once (a job may block for
        good); the loop logs the whole block when it runs again. A job is named only when found
        there at two looks in a row: a process the system did not schedule for a moment stalls
        the loop too, with whatever job it was running at that instant."""
        suspect = None
        while not self._stopped.wait(self._tick_seconds):
            stale = time.monotonic() - self._ticked_at - self._tick_seconds
            if stale < self.block_warning_seconds or self._blocker is not None:
                suspect = None
                continue
            job = self._job_on_loop()
            if job is None or job is not suspect:
                suspect = job
                continue
            self._blocker = (job.task_name, job.pk)
            logger.warning(
                "async job is blocking the event loop task=%s id=%s blocked_ms=%.0f",
                job.task_name, job.pk, stale * 1000,
                extra=fields("job.blocking_loop", task=job.task_name, job_id=job.pk,
                             blocked_ms=round(stale * 1000)))

    def _job_on_loop(self):
        """The job whose task runs on the loop thread now: the one whose coroutine is on the
        thread's stack (``sys._current_frames``, meant for debugging tools such as this)."""
        frame = sys._current_frames().get(self._thread.ident)
        while frame is not None:
            entry = self._entries.get(frame)
            if entry is not None:
                return entry.job
            frame = frame.f_back
        return None
