"""A worker's transactional lane (``runworker --transactional-batch N``): transactional jobs run
inside the transaction that holds their rows, and one write records them all.

Each step (``run_once``) is one transaction:

1. lock up to ``batch`` ready transactional rows in claim order, ``FOR UPDATE SKIP LOCKED``
   (SQLite: under its write lock), writing nothing: no claim, no lease, no claim token;
2. bound the transaction from the database's side (the driver's ``bound_transaction``: a job
   that hangs cannot hold the locks past its time limit; the server ends the transaction);
3. run each job in a savepoint of it (``run/transactional.attempt``): a success keeps its
   writes, a failure has them rolled back; jobs left once the batch has run longer than its
   time limit stay untouched, for the next step;
4. write every outcome of the batch, then commit: the jobs' effects and their completion
   together. The jobs run are marked running under a claim token of the step (one UPDATE, in
   the transaction: no one else ever sees it), and their outcomes go through the one fenced
   outcome write of every claimed job (``run/outcomes.write``: one statement, the workflow
   releases and the waiters' NOTIFY with it).

A worker killed, a connection lost, a database restarted before the commit: the transaction
rolls back, the rows were never changed, and they run again, effects and all, exactly once. A
job that hangs until the database ends the transaction is charged an interruption afterwards
(up to its ``max_interruptions``), so a job that can never finish does not run forever.
"""

import logging
import time
import uuid
from dataclasses import dataclass, field

from django.db import DatabaseError, connections, transaction
from django.db.models import F
from django.utils import timezone

from ..claim.limited import read_controls
from ..claim.plain import CLAIM_ORDER
from ..conf import get_settings
from ..db import ops
from ..db.batches import write_lock_first
from ..models import Job, Queue
from ..run import outcomes
from ..run.execution import report
from ..run.runner import OutcomeKind
from ..run.transactional import attempt
from ..statuses import READY_STATUSES, JobStatus
from ..telemetry import metrics
from .resilience import TRANSIENT, Backoff

logger = logging.getLogger(__name__)


def left_to_the_claim(jobs, controls):
    """``jobs`` (a queryset) as the ordinary claim of a worker with lanes takes them: without the
    transactional jobs, the lanes', while no queue is paused or limited (``controls``, as the
    worker last read them). While one is, unfiltered: a filtered claim leaves held back queues
    alone (``claim/limited.py``), and only the ordinary claim enforces their limits; it may then
    take transactional jobs of other queues too, which it runs exactly once as well
    (``run/transactional.run_claimed``)."""
    return jobs.filter(transactional=False) if controls.unused else jobs


@dataclass
class LaneResult:
    """What one step did."""

    locked: int = 0  # rows locked
    ran: int = 0  # of them, run (the others were left for the next step)
    succeeded: int = 0
    results: list = field(default_factory=list)  # execution.RunResult per job ran


class TransactionalLane:
    """The lane of one worker process. ``batch``: rows locked per transaction (the commit is
    shared by them); ``queues``: as the worker's (None: every queue); ``on_result``: called
    with each job's ``execution.RunResult`` after the commit (the worker's tally and metrics)."""

    def __init__(self, *, alias: str, worker_id: str, batch: int, queues=None,
                 on_result=None, model=Job):
        self.alias = alias
        self.worker_id = worker_id[:255]
        self.batch = batch
        self.queues = queues
        self.on_result = on_result
        self.model = model
        self.running = None  # the job being run now, for a step that failed under it

    def run(self, *, until, poll_interval: float) -> None:
        """The lane's thread: steps until ``until`` (an Event) is set; after a step that found
        fewer rows than a batch, waits up to ``poll_interval``; after a database error, backs
        off (the step was rolled back whole)."""
        backoff = Backoff()
        while not until.is_set():
            try:
                found = self.run_once().locked
                backoff.reset()
            except TRANSIENT as exc:
                connections[self.alias].close()
                delay = backoff.next_delay()
                logger.warning("transactional lane: the database failed (%s); its transaction "
                               "was rolled back, retrying in %.1fs",
                               str(exc).strip().splitlines()[0] if str(exc).strip() else exc,
                               delay)
                until.wait(delay)
                continue
            except Exception:  # a bug, or a receiver's: the step was rolled back; go on
                logger.exception("transactional lane: a step failed; its transaction was "
                                 "rolled back")
                connections[self.alias].close()
                until.wait(backoff.next_delay())
                continue
            if found < self.batch:
                until.wait(poll_interval)
        connections[self.alias].close()

    def run_once(self) -> LaneResult:
        """One transaction: lock, run, write, commit. Raises what the database raised (the
        transaction is rolled back: the rows stay as they were), after charging the job that
        was running an interruption when the database ended the transaction under it."""
        result = LaneResult()
        try:
            with transaction.atomic(using=self.alias):
                done, written = self._step(result)
        except DatabaseError:
            hung, self.running = self.running, None
            if hung is not None:
                self._interrupted(hung)
            raise
        if done:
            self._told(done, written, result)
        return result

    def _step(self, result: LaneResult) -> tuple:
        write_lock_first(self.alias, self.model)  # SQLite: the write lock, waited for, first
        jobs = list(self._ready())
        result.locked = len(jobs)
        if not jobs:
            return [], {}
        limit = max(job.timeout_seconds or get_settings().TRANSACTIONAL_TIMEOUT_SECONDS
                    for job in jobs)
        connection = connections[self.alias]
        with connection.cursor() as cursor:
            for text, params in ops(connection).bound_transaction(seconds=limit):
                cursor.execute(text, params)
        started = time.monotonic()
        done = []
        for job in jobs:
            if done and time.monotonic() - started > limit:
                break  # the rest stay locked only until the commit, untouched
            self._start(job)
            self.running = job
            metrics.job_started(job)
            try:
                outcome = attempt(job, self.alias)
            finally:
                metrics.job_ran(job)
            self.running = None
            done.append((job, outcome))
        written = self._write(done)
        result.ran = len(done)
        result.succeeded = sum(1 for _, o in done if o.kind == OutcomeKind.SUCCEEDED)
        return done, written

    def _ready(self):
        rows = self.model._default_manager.using(self.alias).ready().in_queues(self.queues)
        held_back = read_controls(Queue, self.alias).held_back()
        if held_back:  # a paused or limited queue's jobs wait for the ordinary claim
            rows = rows.exclude(queue__in=held_back)
        return (rows.filter(transactional=True).order_by(*CLAIM_ORDER)
                .select_for_update(skip_locked=True)[:self.batch])

    def _start(self, job) -> None:
        """The job as its run sees it: running, one more attempt, claimed by this worker (in
        memory only: the row is written once, with its outcome)."""
        job.attempts += 1
        job.status = JobStatus.RUNNING
        job.claimed_by = self.worker_id
        job.claimed_at = timezone.now()

    def _write(self, done: list) -> dict:
        """Write every outcome of ``done`` ([(job, outcome)]) in the lane's transaction, by the
        fenced outcome write of any claimed job (``outcomes.write``: the statuses, a workflow's
        children released, PostgreSQL's NOTIFY to the waiters of an awaited job);
        {pk: status written}."""
        now = timezone.now()
        self._claim([job for job, _ in done], now=now, counted=True)
        changes = [(job, outcomes.transition(job, outcome, now=now, result_checked=True))
                   for job, outcome in done]
        written = outcomes.write(changes, self.alias, retried=False)  # sent after the commit
        return {job.pk: str(job.status) for job, _ in done if job.pk in written}

    def _claim(self, jobs, *, now, counted: bool) -> None:
        """Mark the rows of ``jobs``, which this transaction holds locked, running under a claim
        token of their own, claimed by this worker at ``now``; ``counted``: with one more attempt
        (``_start`` counted it in memory). In the lane's transaction, so no one else ever sees
        it: it gives the outcome write's fence (the row still running under that token) the
        meaning it has for a claimed job, on rows whose locks already keep others away. A row
        that left the ready statuses while its job ran (the job cancelled itself) is not marked,
        so the fence leaves it as its job left it."""
        token = uuid.uuid4()
        counting = {"attempts": F("attempts") + 1} if counted else {}
        self.model._default_manager.db_manager(self.alias).filter(
            pk__in=[job.pk for job in jobs], status__in=READY_STATUSES
        ).update(status=JobStatus.RUNNING, claim_token=token, claimed_by=self.worker_id,
                 claimed_at=now, lease_expires_at=None, **counting)
        for job in jobs:
            job.claim_token, job.claimed_at = token, now

    def _told(self, done, written, result) -> None:
        """After the commit: each job's ``job finished`` line, ``job_retried``, ``on_result``."""
        changes = [(job, outcomes.transition(job, outcome, result_checked=True))
                   for job, outcome in done if outcome.kind == OutcomeKind.FAILED]
        outcomes.send_retried(changes, set(written), self.model)
        result.results = [report(job, outcome, job.pk in written) for job, outcome in done]
        if self.on_result is not None:
            for run in result.results:
                self.on_result(run)

    def _interrupted(self, job) -> None:
        """The database ended the step's transaction while ``job`` ran (it hung past its time
        limit, or the database went away): charge it an interruption, in a transaction of its
        own, unless another worker has it locked (then it is running, not hung)."""
        why = (f"the database ended the transactional lane's transaction while worker "
               f"{self.worker_id} ran attempt {job.attempts} (its time limit: "
               f"{job.timeout_seconds:g} s)")
        connections[self.alias].close()  # the broken connection; a new one is opened below
        try:
            with transaction.atomic(using=self.alias):
                write_lock_first(self.alias, self.model)
                rows = (self.model._default_manager.using(self.alias)
                        .filter(pk=job.pk, status__in=READY_STATUSES)
                        .select_for_update(skip_locked=True))
                row = next(iter(rows), None)
                if row is None:
                    return
                row.attempts += 1  # the attempt its errors entry names
                row.claimed_by = self.worker_id
                # An interruption uses no attempt: the lane never wrote this one, so neither
                # attempts nor max_attempts change (none counted, none given back).
                self._claim([row], now=timezone.now(), counted=False)
                change = outcomes.interruption(row, why)._replace(give_back=False)
                outcomes.write([(row, change)], self.alias, retried=False)
        except DatabaseError:
            logger.warning("could not record the interruption of job id=%s (the database is "
                           "away); it runs again", job.pk)
