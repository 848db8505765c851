"""The scheduler: enqueue the due ticks of periodic schedules (docs/schedules.md).

Every worker process runs it, every SCHEDULER_INTERVAL_SECONDS (1 s), on a thread of its own; at
start, it first syncs the schedules declared in the code into the table. A pass reads the due
schedules (one indexed SELECT), plans each one's due ticks by its missed-tick policy
(ticks/tick_plan.py), and carries the plan out in one transaction whose first statement moves
the schedule's cursor, fenced on the cursor it read (schedules/operations.py's enqueue_ticks).
Of all the workers that read the same cursor, one moves it and enqueues; the others find it
moved and go on.

Why every worker, not only the maintenance leader: a tick is due at a precise time, and the
leader runs every MAINTENANCE_INTERVAL_SECONDS (5 s) and is replaced only 15 s after it dies,
so its ticks would be up to 5 s late, and 15 s late after a crash. With every worker looking
each second, a tick is enqueued within about a second of its time by whichever worker looks
first, and no single worker's death delays it. Correctness never depended on one process
ticking (two leaders at once, or forty workers, still give one job per tick), so nothing is
lost by letting all of them try; the cost is one small indexed SELECT per worker per second
(the scheduler's thread keeps its connection for it: opening one a second cost more).
"""

import logging
from dataclasses import dataclass

from django.db import DatabaseError, connections

from ..exceptions import InvalidPeriodicSchedule
from ..models import Schedule
from ..schedules import operations
from .maintenance.steps import check, positive

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchedulerConfig:
    # Who enqueues: recorded on each job it enqueues (payload "schedule" -> "by") and on the
    # schedule's row. runworker passes its worker name.
    holder: str
    # Due schedules handled per pass; more wait for the next pass, a second later.
    batch_size: int = 100

    def __post_init__(self):
        problems = positive(self, "batch_size")
        if not 1 <= len(self.holder) <= 255:
            problems.append("holder must be 1 to 255 characters")
        check(self, problems)


@dataclass(frozen=True)
class SchedulerResult:
    due: int = 0  # schedules found due
    fired: int = 0  # of them, the ones this process moved on (and enqueued for)
    lost: int = 0  # the ones another process moved on first
    enqueued: int = 0  # jobs enqueued
    skipped: int = 0  # ticks skipped by missed-tick policies
    broken: tuple = ()  # names of schedules whose definition no longer parses
    failed: tuple = ()  # names of schedules whose write failed (tried again next pass)


class Scheduler:
    def __init__(self, config: SchedulerConfig, *, alias: str):
        self.config = config
        self.alias = alias
        self._reported_broken: set = set()

    def sync(self, specs=None, now=None) -> operations.SyncResult:
        """Copy the declared schedules into the table (schedules/operations.py); at worker start."""
        return operations.sync(self.alias, specs, now=now)

    def run_once(self, now=None) -> SchedulerResult:
        """One pass: enqueue the ticks due at ``now`` (default: the database's clock). Tests
        pass ``now`` to drive a simulated clock."""
        schedules = Schedule.objects.using(self.alias)
        # Without ``now``, the due SELECT compares with the database's clock itself, and the
        # clock is read on its own only when something is due: an idle pass is one statement,
        # not two (every worker makes one a second; issue 18 counted them). The clock read
        # after the SELECT is later, so every schedule it found is still due at it.
        due = list(schedules.due(now)[: self.config.batch_size])
        if due and now is None:
            now = operations.database_now(self.alias)
        fired = lost = enqueued = skipped = 0
        broken, failed = [], []
        for row in due:
            try:
                plan = operations.plan_for(row, now)
            except InvalidPeriodicSchedule as exc:
                broken.append(row.name)
                if row.name not in self._reported_broken:  # once per process, not per second
                    self._reported_broken.add(row.name)
                    logger.error("schedule name=%s cannot tick: %s", row.name, exc)
                continue
            try:
                result = operations.enqueue_ticks(row, plan, holder=self.config.holder, now=now,
                                                  alias=self.alias)
            except DatabaseError as exc:
                if not connections[self.alias].is_usable():
                    raise  # an outage: the caller retries the pass with backoff
                failed.append(row.name)
                text = str(exc).strip()
                logger.warning("schedule name=%s failed (%s); the next pass tries again",
                               row.name, text.splitlines()[0] if text else type(exc).__name__)
                continue
            if not result.won:
                lost += 1
                continue
            fired += 1
            enqueued += len(result.jobs)
            skipped += plan.skipped
            if plan.skipped:
                logger.warning(
                    "schedule name=%s skipped=%s missed tick(s) from %s to %s (missed=%s, "
                    "grace=%gs)", row.name, plan.skipped, plan.first_skipped.isoformat(),
                    plan.last_skipped.isoformat(), row.missed, row.grace_seconds)
        return SchedulerResult(due=len(due), fired=fired, lost=lost, enqueued=enqueued,
                               skipped=skipped, broken=tuple(broken), failed=tuple(failed))
