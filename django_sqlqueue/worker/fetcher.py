"""The fetcher: a worker process's main thread, claiming jobs into the pool's free slots.

One turn (``step``): give back the jobs claimed ahead that waited too long for a thread (and,
after a claim that failed with its connection, those it took if it committed all the same),
claim up to the free slots (gathered a moment, so that one claim serves several), hand the jobs
to the pool, then decide whether the process goes on: a signal, a recycle (``--max-jobs``,
``--max-memory``, a thread that cannot be stopped), ``--burst`` with nothing left or the
supervisor gone stop it. Between turns it waits for a NOTIFY, a freed slot or the poll
(``wakeup.py``); a claim the database fails is tried again after a backoff (``run``).
"""

import datetime as dt
import logging
import os
import time

from django.utils import timezone

from ..claim.bounded import ClaimBound
from ..claim.held import unheld
from ..claim.limited import QueueControls, read_controls
from ..conf import get_settings
from ..db import outages
from ..models import Job, Queue, Worker
from .pool import CLAIMED_AHEAD_MAX_WAIT, claim_of
from .reporting import resident_memory_mb
from .resilience import TRANSIENT, Backoff, drop_connection
from .shutdown import release
from .transactional_lane import left_to_the_claim

logger = logging.getLogger("django_sqlqueue.worker.process")  # the logger the docs name


class Fetcher:
    def __init__(self, *, config, alias: str, worker_id: str, pool, wakeup, lanes, stopping,
                 say):
        self.config = config
        self.alias = alias
        self.worker_id = worker_id
        self.pool = pool
        self.wakeup = wakeup  # its wait() between turns; poked by a freed slot or a signal
        self.lanes = lanes  # the transactional lanes: their jobs are left to them
        self.stopping = stopping  # threading.Event: stop claiming
        self.say = say  # the process's own lines (reporting.py)
        self.recycle_reason = None  # set once the process should exit and be replaced
        self.draining = None  # why it stopped claiming before a recycle
        self.parent_pid = os.getppid()
        self.claimed_total = 0
        self.claimed_full_batch = False  # the last claim got all it asked for: claim again
        # Whether a freed slot should claim at once (``slot_freed``): the last claim was held
        # back by the slots, so jobs may be waiting for one. Not after a claim that found fewer
        # jobs than it asked for: the queue was empty then, and new jobs wake the fetcher
        # themselves (a NOTIFY, the in-process wake-up, the poll).
        self.owes_claim = True
        # The last claim failed with its connection: it may have committed, its reply lost
        # (``claim/held.py``); its jobs are given back before the next claim.
        self.reply_lost = False
        settings = get_settings()
        # Claims after the last claimed job while full claims are slow (a long transaction).
        self.claim_bound = ClaimBound(settings.SLOW_CLAIM_SECONDS,
                                      settings.FULL_CLAIM_INTERVAL_SECONDS)
        self._last_status = time.monotonic()  # --burst reads its status every 2 s
        self._burst_status = None  # and prints it when it changed
        # The paused and limited queues (claim/limited.py), read again once per poll interval:
        # that is how soon every worker follows a pause, a resume or a new limit.
        self.controls = QueueControls(read_at=-float("inf"))

    def slot_freed(self) -> None:
        """The pool's ``on_slot_free``: a job's thread is done. Claim for it only if jobs may
        be waiting for a slot, or if a slot is what the process waits for to end (``--burst``,
        a recycle). A claim that finds nothing costs a statement, and the thread that has just
        finished is on its way to write its outcome: a workflow's next step waits for that
        write, not for a claim that comes before it."""
        if self.owes_claim or self.config.burst or self.draining:
            self.wakeup.poke()

    def drain(self, reason: str) -> None:
        """Stop claiming; once the running jobs are done, recycle (``reason`` says why)."""
        self.draining = reason
        self.wakeup.poke()

    def run(self):
        """Turn until a step says stop; a claim the database failed is tried again after a
        backoff."""
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
        # Read again after the claim, before the wait, so that the claim after a wake-up
        # seldom pays for it (the claim reads them only once they are a poll interval old:
        # every worker still follows a pause or a new limit within one).
        self._controls(max_age=self.config.poll_interval / 2)
        if self.wakeup.peers_due():
            # How many workers share a NOTIFY with this one (worker/wakeup.py, Claimers); after
            # the claim, so that it never delays one.
            self.wakeup.set_peers(
                Worker.objects.using(self.alias).values_list("queues", flat=True))
        self._check_recycle()
        if self.recycle_reason:
            return False
        if self.config.supervised and os.getppid() != self.parent_pid:
            self.say("the supervisor is gone: stopping", "worker.orphaned", level="warning")
            return False
        if self.config.burst:
            if clock() - self._last_status >= 2:
                self._print_burst_status()
                self._last_status = clock()
            if not claimed and self._burst_done():
                self._print_burst_status()
                self.say("burst: nothing left to do, exiting", "worker.drained")
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
            # Claimed ahead, but the threads are busy with long jobs.
            release(job, alias=self.alias, worker_id=self.worker_id)
        if self.reply_lost:
            self._give_back_unheld()
        if self.draining:
            return []
        self._gather_free_slots()
        free = self.pool.free_slots()
        if self.config.max_jobs is not None:
            free = min(free, self.config.max_jobs - self.claimed_total)
        if free <= 0:
            self.owes_claim = True
            return []
        controls = self._controls()
        started = time.monotonic()
        # Paused or limited queues are claimed their own way (queue_limits.py), always in full.
        after = self.claim_bound.bound(started) if controls.unused else None
        claimable = Job.objects.using(self.alias)
        if self.lanes:
            claimable = left_to_the_claim(claimable, controls)
        try:
            jobs = claimable.claim(
                self.config.queues, self.worker_id, limit=free, lease=self.config.lease_seconds,
                controls=controls, after=after,
            )
        except TRANSIENT:
            self.reply_lost = True
            raise
        self.claim_bound.claimed(jobs, bounded=after is not None,
                                 seconds=time.monotonic() - started, now=started)
        self.claimed_full_batch = len(jobs) == free
        # A paused, limited or fair queue may hold jobs back that a freed slot (a job of a key
        # at its limit done) lets through: those claims are owed to every freed slot.
        self.owes_claim = self.claimed_full_batch or not controls.unused
        if jobs:
            self.wakeup.found_jobs()
        for job in jobs:
            self.pool.submit(job)
        self.claimed_total += len(jobs)
        return jobs

    def _give_back_unheld(self) -> None:
        """Give back, released (no attempt, no interruption counted), the jobs running under
        this worker's name that it does not hold: a claim committed, its reply lost to a restart
        or a broken connection. Left to their leases, the rescue counted each as interrupted by
        a lost worker. Only the fetcher claims, and it is here: no claim of its own is on the
        way."""
        held = [claim_of(entry.job) for entry in self.pool.held()]
        lost = unheld(Job.objects.using(self.alias), self.worker_id[:255], held)
        if lost:
            logger.warning("a claim's reply was lost: giving back %d job(s) it took (ids %s)",
                           len(lost), ", ".join(str(job.pk) for job in lost))
        for job in lost:
            release(job, alias=self.alias, worker_id=self.worker_id)
        self.reply_lost = False

    def _controls(self, max_age: float | None = None) -> QueueControls:
        """The paused and limited queues, read again once ``max_age`` seconds old (default:
        the poll interval)."""
        max_age = self.config.poll_interval if max_age is None else max_age
        if time.monotonic() - self.controls.read_at >= max_age:
            self.controls = read_controls(Queue, self.alias)
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

    def _print_burst_status(self):
        """``burst: attempts_run=3 ready=0 unfinished=1``, only when one of them changed since
        the last line: a burst run waiting on a long job says nothing new every 2 s."""
        try:
            jobs = Job.objects.using(self.alias).in_queues(self.config.queues)
            ready = jobs.ready().count()
            waiting = jobs.unfinished().count()
        except TRANSIENT:
            return
        status = (self.pool.jobs_done, ready, waiting)
        if status == self._burst_status:
            return
        self._burst_status = status
        self.say(f"burst: attempts_run={self.pool.jobs_done} ready={ready} "
                 f"unfinished={waiting}", "worker.burst", attempts_run=self.pool.jobs_done,
                 ready=ready, unfinished=waiting)

    def _say_abandoned(self, stuck):
        """A burst run exits leaving threads stuck in jobs it gave up on."""
        if stuck:
            ids = ", ".join(str(entry.job.pk) for entry in stuck)
            self.say(f"burst: abandoning {len(stuck)} thread(s) still running job(s) {ids} "
                     "past their time limit or cancel (their outcome is written); the exit "
                     "stops them", "worker.abandoned", level="warning",
                     job_ids=[entry.job.pk for entry in stuck])
