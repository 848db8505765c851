"""When a worker claims only the jobs after the last one it claimed (a bounded claim).

Behind a long transaction elsewhere (a report, a ``pg_dump``, a session left idle in
transaction), PostgreSQL cannot remove or mark dead the ready-index entries of the jobs claimed
since it began: the snapshot may still see them as ready. They come first in claim order, so a
claim that starts at the front of the order visits the table for each of them, and every claim
costs more the longer the transaction lasts (90 s at 3,000 jobs/s: 40 ms a claim instead of 1;
docs/performance.md). A claim that starts after the last job this worker claimed skips them
(the driver's ``ready_ids_after``): its cost no longer grows with the transaction's age.

It is used only while claims are slow, and never alone for long:

* A worker claims in full (from the front of the order, exactly in claim order) until
  ``SLOW_IN_A_ROW`` full claims in a row took longer than ``SLOW_CLAIM_SECONDS``. One is not
  enough: the time is the worker's wall clock around the statement and its commit, and in a
  busy process a thread waits for the GIL or a commit for its flush now and then. In a run at
  3,000 jobs/s on 2 shared cores, one slow full claim at 20 ms turned bounded claims on for 61%
  of the claims with no long transaction anywhere; behind one, every full claim is slow.
* Then it claims with a bound, the claim-order position (priority, run_at, id) of the last job
  it claimed, so that its scan starts there.
* It still claims in full at least every ``FULL_CLAIM_INTERVAL_SECONDS``, or every
  ``FULL_CLAIM_COST_FACTOR`` times the last full claim's duration if that is longer: a job
  sorted before the bound (a higher priority enqueued since, a retry or a scheduled job whose
  run_at came due, a job enqueued with a run_at in the past, a rescued job) is claimed by that
  full claim. That is the longest such a job waits beyond what exact order would give it; the
  worker's wait for work is cut to it (``seconds_until_full``). Why the factor: behind a
  5-minute transaction at 3,000 jobs/s a full claim took 0.3-0.5 s (docs/performance.md); once
  a second, that is a third to a half of a worker's fetching time, while its threads wait for
  jobs. With the factor, full claims take at most a twentieth of it.
* A bounded claim that comes back short does not bring the full claim forward: a worker that
  keeps up comes back short after every wake-up, and a full claim each time is the slow claim
  again. The interval alone bounds the wait.

Pure bookkeeping, with the time passed in: the worker (process.py) asks ``bound(now)`` before
each claim and reports it with ``claimed(...)``.
"""

from dataclasses import dataclass, field

#: Full claims in a row slower than SLOW_CLAIM_SECONDS before bounded claims start.
SLOW_IN_A_ROW = 3
#: While bounded, a full claim comes at most this many times its own duration after the last.
FULL_CLAIM_COST_FACTOR = 20


@dataclass
class ClaimBound:
    """One worker's bound: its settings, and what its claims showed so far."""

    #: A full claim slower than this (seconds) turns bounded claims on; None: never (every
    #: claim in full, claim order always exact).
    slow_claim_seconds: float | None
    #: While bounded, a full claim at least this often (seconds).
    full_claim_interval_seconds: float
    #: The claim-order position (priority, run_at, id) of the last job claimed, or None.
    position: tuple | None = None
    #: Full claims in a row slower than ``slow_claim_seconds``, up to now.
    slow_full_claims: int = 0
    #: time.monotonic() of the last full claim, and how long it took (seconds).
    last_full_at: float = field(default=float("-inf"))
    last_full_seconds: float = 0.0

    def bound(self, now: float) -> tuple | None:
        """The position the next claim starts after, or None for a full claim."""
        if not self.slow or self.position is None:
            return None
        if now - self.last_full_at >= self.full_claim_every():
            return None
        return self.position

    def claimed(self, jobs: list, *, bounded: bool, seconds: float, now: float) -> None:
        """Record a claim: the jobs it returned (in claim order), whether it had a bound, and
        how long it took."""
        if jobs:
            last = jobs[-1]
            self.position = (last.priority, last.run_at, last.pk)
        if not bounded:
            self.last_full_at, self.last_full_seconds = now, seconds
            slow = self.slow_claim_seconds is not None and seconds > self.slow_claim_seconds
            # A quick one ends bounded claims at once: exact order is back.
            self.slow_full_claims = self.slow_full_claims + 1 if slow else 0

    @property
    def slow(self) -> bool:
        """Full claims are slow: claim with a bound until a quick full claim says otherwise."""
        return self.slow_full_claims >= SLOW_IN_A_ROW

    def seconds_until_full(self, now: float) -> float | None:
        """While bounded claims are on, how long until a full claim is due (the longest the
        worker may wait for work before claiming again); None when every claim is full."""
        if not self.slow:
            return None
        return max(0.0, self.last_full_at + self.full_claim_every() - now)

    def full_claim_every(self) -> float:
        """Seconds between two full claims while bounded: the interval, or longer when full
        claims are so slow that they would take more than 1/FULL_CLAIM_COST_FACTOR of the time."""
        return max(self.full_claim_interval_seconds,
                   FULL_CLAIM_COST_FACTOR * self.last_full_seconds)
