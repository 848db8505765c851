"""The cleaner: delete finished jobs past their retention, in batches of short transactions.

``succeeded`` jobs go ``keep_succeeded_seconds`` after they finished, ``exhausted``,
``cancelled`` and ``expired`` ones ``keep_failed_seconds`` after (None keeps them). Each batch
is one DELETE of up to ``batch_size`` rows in its own short transaction, walking the ids upwards
(``JobQuerySet.delete_batch``), so a backlog of a million rows is a thousand small transactions,
never one that locks every row it deleted until the end, and no batch scans again the rows that
earlier ones deleted. A run stops after ``run_seconds`` and the next one goes on from there, so a
large backlog does not hold up the other steps.

Two paces. Rows that have just passed their retention are deleted with ``pause_seconds`` (20 ms)
between batches. Without it the cleaner keeps up at any rate, but takes the workers' share of the
database: in issue 41's sustained run (2 cores, 0.8x the drain's rate, a 60 s retention) the
workers fell behind a minute in, as soon as the first rows were due, and finished 0.65x of the
drain's rate over 30 minutes, against 0.77x with the pause (docs/performance.md). A backlog, rows
``backlog_after_seconds`` or more past their retention (a first prune, a lowered retention, a
cleaner stopped for a while), is a one-off: after each of its batches the cleaner pauses
``backlog_pause_ratio`` times as long as the batch took, a pause that grows as the database gets
busier, so that the workers beside it keep most of it (ten million rows: the drain beside the
prune lost 6% with the pauses, 27% with a fixed 20 ms pause; a backlog that size takes the
cleaner 1.5 hours).
"""

import datetime as dt
import time
from dataclasses import dataclass

from django.utils import timezone

from ...conf import QueueSettings
from ...models import Job
from ...statuses import JobStatus
from .steps import check, positive, run_batches

_defaults = QueueSettings()


@dataclass(frozen=True)
class CleanerConfig:
    # Succeeded jobs are deleted this many seconds after they finished (None: kept).
    keep_succeeded_seconds: float | None = _defaults.KEEP_SUCCEEDED_SECONDS
    # The same for exhausted, cancelled and expired jobs.
    keep_failed_seconds: float | None = _defaults.KEEP_FAILED_SECONDS
    # Rows deleted per statement, each batch its own transaction (MAINTENANCE_BATCH_SIZE).
    batch_size: int = _defaults.MAINTENANCE_BATCH_SIZE
    # PostgreSQL: time limit of each batch's statements (None: none).
    statement_timeout_seconds: float | None = _defaults.MAINTENANCE_STATEMENT_TIMEOUT_SECONDS
    # A full sweep at most this often (PRUNE_INTERVAL_SECONDS): finished rows are read without
    # an index of their own (one would cost a write per job).
    interval_seconds: float = _defaults.PRUNE_INTERVAL_SECONDS
    # Longest one run keeps deleting before it hands back to the other steps; a backlog left
    # over is taken up at the next pass, not an interval later.
    run_seconds: float = 10.0
    # Pause between the batches of rows that have just passed their retention, which leaves the
    # database to the workers' own writes in between (River's cleaner does the same; the
    # module's docstring has the numbers).
    pause_seconds: float = 0.02
    # Rows this long past their retention, or two sweeps' intervals if that is longer, are a
    # backlog, deleted gently (the module's docstring): a cleaner that keeps up never sees one.
    backlog_after_seconds: float = 3600.0
    # On a backlog, the pause after a batch is this many times as long as the batch took: the
    # cleaner deletes at most an eighth of the time. Ten million rows pruned beside a drain of a
    # million jobs on two cores: the drain 0.94x of its rate without pruning, the prune 1,800
    # rows a second; with a fixed 20 ms pause, 0.73x (benchmarks/prune_while_draining.py,
    # docs/performance.md).
    backlog_pause_ratio: float = 7.0

    def __post_init__(self):
        problems = positive(self, "keep_succeeded_seconds", "keep_failed_seconds",
                            "statement_timeout_seconds", none_allowed=True)
        problems += positive(self, "batch_size", "interval_seconds", "run_seconds",
                             "backlog_after_seconds")
        for name in ("pause_seconds", "backlog_pause_ratio"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                problems.append(f"{name} must be 0 or more, not {value!r}")
        check(self, problems)


@dataclass(frozen=True)
class CleanerResult:
    deleted: int = 0
    batches: int = 0
    done: bool = True  # False: stopped by run_seconds or a lost leadership; more is left


class Cleaner:
    def __init__(self, config: CleanerConfig | None = None, *, alias: str,
                 clock=time.monotonic, sleep=time.sleep):
        self.config = config or CleanerConfig()
        self.alias = alias
        self.clock = clock  # run_seconds and the batches' time are on this clock
        self.sleep = sleep
        self.swept_at = None  # self.clock() when the last complete sweep started
        self.sweep_started_at = None
        self.after_id = None  # where an unfinished sweep goes on

    def is_due(self) -> bool:
        """A sweep is unfinished, or the last complete one started an interval ago or more."""
        return (self.after_id is not None or self.swept_at is None
                or self.clock() - self.swept_at >= self.config.interval_seconds)

    def run_once(self, now=None, *, keep_going=None) -> CleanerResult:
        """Delete finished jobs past their retention ("now": the database's clock, or ``now``)
        for up to ``run_seconds``; ``keep_going()`` is asked between batches."""
        config = self.config
        if config.keep_succeeded_seconds is None and config.keep_failed_seconds is None:
            self.swept_at = self.clock()
            return CleanerResult()
        if self.after_id is None:
            self.sweep_started_at = self.clock()
        jobs = Job.objects.using(self.alias).prunable(
            now, keep_succeeded=config.keep_succeeded_seconds,
            keep_failed=config.keep_failed_seconds,
        )

        ratio = self._backlog_ratio(jobs, now)
        took = [0.0]  # the last batch's seconds

        def batch() -> int:
            started = self.clock()
            ids = jobs.delete_batch(config.batch_size, after=self.after_id)
            took[0] = self.clock() - started
            if ids:
                self.after_id = max(ids)
            return len(ids)

        deadline = self.clock() + config.run_seconds

        def between() -> bool:
            if self.clock() >= deadline:
                return False
            pause = max(config.pause_seconds, ratio * took[0])
            if pause:
                self.sleep(pause)
            return keep_going is None or keep_going()

        deleted, batches, done = run_batches(
            self.alias, batch, size=config.batch_size,
            statement_timeout=config.statement_timeout_seconds, keep_going=between,
        )
        if done:
            self.after_id = None
            self.swept_at = self.sweep_started_at
        return CleanerResult(deleted=deleted, batches=batches, done=done)

    def _backlog_ratio(self, jobs, now) -> float:
        """``backlog_pause_ratio`` if this run starts on a backlog, else 0: whether the next row
        of the walk finished ``backlog_after_seconds`` (or two intervals) or more past its
        retention. One read by the primary key, where the first batch starts; the host's clock
        without ``now``, which an hour's margin makes good enough."""
        config = self.config
        next_row = jobs.filter(pk__gt=self.after_id) if self.after_id is not None else jobs
        row = next_row.order_by("pk").values_list("status", "finished_at").first()
        if row is None:
            return 0.0
        status, finished_at = row
        keep = (config.keep_succeeded_seconds if status == JobStatus.SUCCEEDED
                else config.keep_failed_seconds)
        behind = (now or timezone.now()) - finished_at - dt.timedelta(seconds=keep)
        backlog_after = max(config.backlog_after_seconds, 2 * config.interval_seconds)
        return config.backlog_pause_ratio if behind.total_seconds() >= backlog_after else 0.0
