"""A worker process's graceful stop, in order: stop claiming, give back the jobs claimed but not
started, let the running ones finish within ``--shutdown-timeout``, give back those still
running (an interruption that does not count: a deploy says nothing about the job), write the
outcomes still waiting for their batch, and unregister the worker."""

import logging
import time

from ..models import Worker
from ..run import outcomes
from ..telemetry import metrics
from .log_format import fields
from .resilience import TRANSIENT, call_with_retry

logger = logging.getLogger("django_sqlqueue.worker.process")  # the logger the docs name


def shut_down(process) -> None:
    """Stop ``process`` (a ``WorkerProcess``) as said above; returns once it is unregistered."""
    process.stopping.set()
    process.wakeup.stop()
    for job in process.pool.take_unstarted():
        release(job, alias=process.alias, worker_id=process.worker_id)
    timeout = process.config.shutdown_timeout
    deadline = time.monotonic() + timeout
    if process.pool.busy():
        busy = len(process.pool.busy())
        process._say(f"waiting up to {timeout:g}s for {busy} running job(s) to finish",
                     "worker.draining", running=busy, timeout_seconds=timeout)
    while process.pool.busy() and time.monotonic() < deadline:
        time.sleep(0.05)
    for entry in process.pool.busy():
        if not entry.ran:  # still running; a finished job's outcome is the writer's
            release(entry.job, alias=process.alias, worker_id=process.worker_id,
                    running=entry.started_at is not None)
    process.writer.stop()  # write the outcomes still waiting for their batch
    metrics.worker_stopped()
    process.finished.set()
    process.pool.stop()
    try:
        call_with_retry(
            lambda: Worker.objects.using(process.alias).filter(name=process.worker_id).delete(),
            alias=process.alias, what="unregistering the worker",
            deadline=time.monotonic() + 5,
        )
    except TRANSIENT:
        pass  # maintenance will reap the row
    process._say(f"stopped after {process.outcomes.summary()}", "worker.stopped",
                 worker=process.worker_id, **process.outcomes.counts())


def release(job, *, alias: str, worker_id: str, running=False) -> None:
    """Give back a job the worker ``worker_id`` holds: one not started yet, or one still
    ``running`` at shutdown (an interruption, recorded in its errors but not counted towards its
    max_interruptions)."""
    if running:
        why = f"worker {worker_id} shut down while running attempt {job.attempts}"
        give_back = lambda: outcomes.write_one(  # noqa: E731
            job, outcomes.interruption(job, why, counted=False))
    else:
        give_back = job.release
    try:
        released = call_with_retry(give_back, alias=alias, what="releasing a job",
                                   deadline=time.monotonic() + 5)
    except TRANSIENT:
        released = False
    logger.warning("job released task=%s id=%s attempt=%s released=%s",
                   job.task_name, job.pk, job.attempts, released,
                   extra=fields("job.released", task=job.task_name, job_id=job.pk,
                                attempt=job.attempts, released=released))
