"""Cancels of running jobs, on the worker's side: learn of them, tell the job, stop it if it
does not stop itself.

``run_once`` reads which of the jobs this process runs were asked to stop (one indexed SELECT
by primary key, only while jobs are held), then for each new one calls
``cancellation.request_stop``: the job's code sees ``current_job().cancel_requested``, an async
job's task is cancelled. A job still running ``grace_seconds`` after that is stopped the way a
job past its timeout is (``Pool.time_out``): its outcome, ``cancelled``, is written at once and
its thread's late outcome is dropped; under ``--processes`` the process then drains and exits
to be replaced, which ends the thread (``on_stopped``), while in a single process the thread is
abandoned and keeps its slot until it returns.

The process runs ``run_once`` every heartbeat interval, at once when a NOTIFY on
``notify.CANCEL_CHANNEL`` arrives (PostgreSQL), and at each grace deadline.
"""

import logging
import time
from dataclasses import dataclass

from django.db import connections

from ..models import Job
from ..run.cancellation import cancelled_error, request_stop
from ..run.runner import Outcome, OutcomeKind
from .resilience import TRANSIENT, call_with_retry

logger = logging.getLogger(__name__)


@dataclass
class CancelResult:
    asked: int = 0  # jobs told to stop at this step
    stopped: int = 0  # jobs stopped after their grace period


class CancelWatcher:
    def __init__(self, *, alias: str, pool, grace_seconds: float, on_stopped,
                 clock=time.monotonic):
        self.alias = alias
        self.pool = pool
        self.grace_seconds = grace_seconds
        self.on_stopped = on_stopped  # (job) after a job was stopped; process mode recycles
        self.clock = clock
        self._deadlines: dict = {}  # job pk -> clock() past which it is stopped

    def run_once(self) -> CancelResult:
        result = CancelResult()
        held = [entry for entry in self.pool.held() if not entry.ran and not entry.timed_out]
        by_pk = {entry.job.pk: entry for entry in held if entry.job.pk not in self._deadlines}
        if by_pk:
            asked = Job.objects.using(self.alias).cancelling().filter(pk__in=list(by_pk))
            for pk, token, at, by in asked.values_list(
                    "pk", "claim_token", "cancel_requested_at", "cancelled_by"):
                entry = by_pk[pk]
                if token != entry.job.claim_token:
                    continue  # no longer this claim's
                self._deadlines[pk] = self.clock() + self.grace_seconds
                logger.warning("job cancel requested task=%s id=%s attempt=%s by=%s "
                               "grace_s=%g", entry.job.task_name, pk, entry.job.attempts, by,
                               self.grace_seconds)
                request_stop(entry.job, requested_at=at, by=by)
                result.asked += 1
        result.stopped = self._stop_overdue()
        return result

    def next_deadline(self) -> float | None:
        """The earliest grace deadline still pending (on ``clock``), or None."""
        return min(self._deadlines.values(), default=None)

    def _stop_overdue(self) -> int:
        now = self.clock()
        held = {entry.job.pk: entry for entry in self.pool.held()}
        stopped = 0
        for pk, deadline in list(self._deadlines.items()):
            entry = held.get(pk)
            if entry is None or entry.ran or entry.timed_out:
                del self._deadlines[pk]  # it stopped by itself (or was stopped)
                continue
            if now < deadline:
                continue
            del self._deadlines[pk]
            logger.warning("job did not stop when cancelled task=%s id=%s attempt=%s "
                           "grace_s=%g", entry.job.task_name, pk, entry.job.attempts,
                           self.grace_seconds)
            error = cancelled_error(
                entry.job, f"; it did not stop within {self.grace_seconds:g}s and was stopped")
            self.pool.time_out(entry, Outcome(OutcomeKind.CANCELLED, error=error))
            if entry.started_at is not None:  # a thread runs it: only an exit can stop that
                self.on_stopped(entry.job)
            stopped += 1
        return stopped

    def watch(self, *, until, due, interval: float) -> None:
        """The process's cancel thread: ``run_once`` every ``interval`` seconds, at once when
        ``due`` is set (a NOTIFY), and at each grace deadline, until ``until`` is set (every
        held job is done). No query while no job is held and no deadline waits."""
        while not until.is_set():
            wait = interval
            deadline = self.next_deadline()
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - self.clock()))
            due.wait(wait)
            due.clear()
            if until.is_set():
                return
            if self.pool.is_idle() and self.next_deadline() is None:
                continue
            try:
                call_with_retry(self.run_once, alias=self.alias,
                                what="looking for cancelled jobs", stop=until.is_set)
            except TRANSIENT:
                pass
            except Exception:
                logger.exception("looking for cancelled jobs failed; trying again")
            finally:
                connections[self.alias].close_if_unusable_or_obsolete()
