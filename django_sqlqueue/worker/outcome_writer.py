"""The worker's one outcome writer: every outcome of a held job is written here, fenced.

Job threads (and the heartbeat, for a job past its timeout) ``submit`` outcomes. Batched, the
default, a thread of its own writes whatever has gathered every ``interval`` seconds (at once
when ``max_batch`` are waiting), successes and failures alike, in one statement
(``outcomes.write``): every commit costs a WAL flush, so one statement per finished job would
make commits, not jobs, the limit. Inline, each outcome is written in the submitting thread.

A job stays held by the pool, its lease renewed by the heartbeat, until its outcome is written:
``on_written(job, outcome, applied)`` tells the pool. So the backlog of unwritten outcomes is
bounded by the pool's capacity, and while the database refuses writes the pool has no free slot
and the worker claims nothing more. A crash loses at most the unwritten outcomes: those jobs are
still running in the table, their leases expire, and they run again (at-least-once).
"""

import logging
import threading
import time

from django.db import connections
from django.utils import timezone

from ..exceptions import InvalidJob
from ..run import outcomes
from ..run.runner import Outcome, OutcomeKind
from .resilience import TRANSIENT, call_with_retry

logger = logging.getLogger(__name__)


class OutcomeWriter:
    def __init__(self, *, alias: str, on_written=None, batched: bool = True, interval: float = 0.02,
                 max_batch: int = 500, outcome_deadline: float = 300.0):
        self.alias = alias
        # (job, outcome, applied: bool) once written or given up; a pool given this writer
        # sets it to its own ``outcome_written``.
        self.on_written = on_written
        self.batched = batched
        self.interval = interval  # seconds an outcome may wait for others to share its write
        self.max_batch = max_batch  # outcomes per statement
        self.outcome_deadline = outcome_deadline  # seconds to keep retrying a write
        self._pending: list = []  # (job, outcome, transition)
        self._lock = threading.Lock()
        # Set while an outcome waits: an idle writer sleeps on it rather than waking every
        # ``interval`` to find nothing (50 times a second, half a percent of a core per idle
        # worker).
        self._waiting = threading.Event()
        self._full = threading.Event()
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        if self.batched:
            self._thread = threading.Thread(target=self._loop, name="sqlqueue-outcomes",
                                            daemon=True)
            self._thread.start()

    def submit(self, job, outcome: Outcome, *, at_once: bool = False) -> None:
        """Write ``outcome`` of ``job`` (now, or with the next batch). ``at_once``: no other
        outcome is on its way to share the write (the pool runs nothing else), so the writer
        goes now rather than at the end of its ``interval``: waiting would only delay this
        job's outcome, and with it whatever waits for it (the next step of a chain, a waiter)."""
        item = (job, outcome, _transition(job, outcome))
        if not self.batched:
            self._write([item])
            return
        with self._lock:
            self._pending.append(item)
            self._waiting.set()
            if at_once or len(self._pending) >= self.max_batch:
                self._full.set()

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def stop(self, timeout=30.0) -> None:
        """Write what is waiting and stop."""
        self._stop.set()
        self._waiting.set()
        self._full.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def flush(self) -> int:
        """Write one batch of what is waiting (one step); returns how many outcomes."""
        with self._lock:
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch:]
            if self._pending:
                self._full.set()
            else:
                self._waiting.clear()
        if batch:
            self._write(batch)
        return len(batch)

    def _loop(self):
        while True:
            self._waiting.wait()
            self._full.wait(self.interval)
            self._full.clear()
            self.flush()
            if self._stop.is_set():
                while self.flush():
                    pass
                connections[self.alias].close()
                return

    def _write(self, batch) -> None:
        if len({job.pk for job, _, _ in batch}) < len(batch):
            # Two claims of one job: an old one whose lease was lost, and the job's claim now.
            # The statement names the ids it wrote, not the claims, so each claim of a job goes
            # in a statement of its own, where its fence alone decides.
            for part in _one_claim_per_job(batch):
                self._write(part)
            return
        try:
            applied = call_with_retry(
                lambda: outcomes.write([(job, change) for job, _, change in batch], self.alias),
                alias=self.alias, what=f"recording the outcomes of {len(batch)} job(s)",
                deadline=time.monotonic() + self.outcome_deadline,
            )
        except TRANSIENT:
            logger.error("gave up recording the outcomes of %s job(s); their leases will run "
                         "them again", len(batch))
            applied = set()
        except Exception:  # noqa: BLE001 - the writer's thread must outlive any one write
            # Not an outage: the database refused this statement (a trigger, a broken temporary
            # file, a bug). Retrying it would fail again, and letting it escape would end this
            # thread, after which no outcome is ever written while the jobs stay held, their
            # leases renewed for ever. So each outcome is tried alone, and the ones refused are
            # given up: still running in the table, their leases run them again.
            if len(batch) > 1:
                for item in batch:
                    self._write([item])
                return
            job = batch[0][0]
            logger.exception("the database refused the outcome of job %s (task %s); its lease "
                             "will run it again", job.pk, job.task_name)
            applied = set()
        for job, outcome, _ in batch:
            self.on_written(job, outcome, job.pk in applied)


def _one_claim_per_job(batch) -> list:
    """``batch`` split into as few parts as hold each job at most once, in order."""
    parts = []  # (items, their job ids)
    for item in batch:
        pk = item[0].pk
        part = next((part for part in parts if pk not in part[1]), None)
        if part is None:
            part = ([], set())
            parts.append(part)
        part[0].append(item)
        part[1].add(pk)
    return [items for items, _ in parts]


def _transition(job, outcome: Outcome):
    """The outcome's transition, computed when it happened (its time, its traceback)."""
    now = timezone.now()
    try:
        # Only the runner's outcomes come here, and it checked their results.
        return outcomes.transition(job, outcome, now=now, result_checked=True)
    except InvalidJob as exc:  # e.g. a result that is not JSON: the attempt failed for good
        return outcomes.transition(job, Outcome(OutcomeKind.ABORTED, error=exc), now=now)
