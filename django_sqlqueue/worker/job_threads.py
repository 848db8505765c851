"""The pool's job threads: each takes the next claimed job from the inbox and runs it.

The pool (``pool.py``) holds the jobs and routes each claimed one: a sync job (or any job, with
no event loop) into this inbox, an async one to the event loop (``event_loop.py``). A thread
waits at the pool's gate while the database is gone, reads back the held claims once after
trouble (``lost_claims.py``), starts the job through the pool (``Pool.begin``: None if it was
withdrawn meanwhile), runs it, and hands the outcome back (``Pool.finish``), which sends it to
the outcome writer.
"""

import logging
import queue
import threading

from django.db import connections

from ..run import runner, transactional
from ..telemetry import metrics
from .resilience import tidy_connections

logger = logging.getLogger("django_sqlqueue.worker.pool")  # the logger the docs name


class PoolStartError(RuntimeError):
    """The system refused to start all of the pool's threads."""


class JobThreads:
    def __init__(self, pool, size: int):
        self.pool = pool
        self.size = size
        # SimpleQueue: put/get in C, without queue.Queue's conditions; one hand-off per job.
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
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

    def submit(self, job) -> None:
        self._inbox.put(job)

    def take_unstarted(self) -> list:
        """Empty the inbox: the jobs no thread has taken yet (withdrawn claims among them)."""
        taken = []
        while True:
            try:
                job = self._inbox.get_nowait()
            except queue.Empty:
                return taken
            if job is not None:
                taken.append(job)

    def stop(self) -> None:
        """Let every thread end once the jobs before it in the inbox are done."""
        for _ in self._threads:
            self._inbox.put(None)

    def join(self, wait: float) -> None:
        for thread in self._threads:
            thread.join(wait)

    def _work(self):
        pool = self.pool
        checked = pool.gate.trouble
        while True:
            pool.gate.wait(pool.stopped.is_set)  # no job starts while the database is gone
            job = self._inbox.get()
            if job is None:
                connections.close_all()  # this thread's own connections
                return
            if pool.gate.trouble != checked:  # a connection broke somewhere: is this one's?
                checked = pool.lost_claims.after_trouble()
            try:
                self._run(job)
            except BaseException:  # never lose a thread; the lease brings the job back
                logger.exception("job thread failed around job id=%s", job.pk)
                pool.forget(job)

    def _run(self, job):
        pool = self.pool
        entry = pool.begin(job)
        if entry is None:  # withdrawn before it started (shutdown, waited too long)
            return
        tidy_connections()  # replaces broken ones; honours CONN_MAX_AGE > 0
        metrics.job_started(job)
        try:
            if job.transactional:  # its success is written with its effects (run/transactional)
                outcome, written = transactional.run_claimed(job, pool.alias)
            else:
                outcome, written = runner.run(job), None
        finally:
            metrics.job_ran(job)
        pool.finish(entry, outcome, written=written)
