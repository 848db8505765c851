"""The cleaner: delete finished jobs past their retention, in batches of short transactions.

``succeeded`` jobs go ``keep_succeeded_seconds`` after they finished, ``exhausted``,
``cancelled`` and ``expired`` ones ``keep_failed_seconds`` after (None keeps them). Each batch
is one DELETE of up to ``batch_size`` rows in its own short transaction, walking the ids upwards
(``JobQuerySet.delete_batch``), so a backlog of a million rows is a thousand small transactions,
never one that locks every row it deleted until the end, and no batch scans again the rows that
earlier ones deleted. A run stops after ``run_seconds`` and the next one goes on from there, so a
large backlog does not hold up the other steps.
"""

import time
from dataclasses import dataclass

from ...conf import QueueSettings
from ...models import Job
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
    # Pause between batches, which leaves the database to the workers' own writes in between
    # (River's cleaner does the same). Pruning a million rows while two workers drained, on two
    # cores: 18 s and the drain 25% slower without it, 49 s and 15% slower with 20 ms
    # (benchmarks/prune_while_draining.py). A backlog is a one-off; gentleness matters more.
    pause_seconds: float = 0.02

    def __post_init__(self):
        problems = positive(self, "keep_succeeded_seconds", "keep_failed_seconds",
                            "statement_timeout_seconds", none_allowed=True)
        problems += positive(self, "batch_size", "interval_seconds", "run_seconds")
        if not isinstance(self.pause_seconds, int | float) or self.pause_seconds < 0:
            problems.append(f"pause_seconds must be 0 or more, not {self.pause_seconds!r}")
        check(self, problems)


@dataclass(frozen=True)
class CleanerResult:
    deleted: int = 0
    batches: int = 0
    done: bool = True  # False: stopped by run_seconds or a lost leadership; more is left


class Cleaner:
    def __init__(self, config: CleanerConfig | None = None, *, alias: str,
                 clock=time.monotonic):
        self.config = config or CleanerConfig()
        self.alias = alias
        self.clock = clock
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

        def batch() -> int:
            ids = jobs.delete_batch(config.batch_size, after=self.after_id)
            if ids:
                self.after_id = max(ids)
            return len(ids)

        deadline = self.clock() + config.run_seconds

        def between() -> bool:
            if self.clock() >= deadline:
                return False
            if config.pause_seconds:
                time.sleep(config.pause_seconds)
            return keep_going is None or keep_going()

        deleted, batches, done = run_batches(
            self.alias, batch, size=config.batch_size,
            statement_timeout=config.statement_timeout_seconds, keep_going=between,
        )
        if done:
            self.after_id = None
            self.swept_at = self.sweep_started_at
        return CleanerResult(deleted=deleted, batches=batches, done=done)
