"""The expirer: ``queued`` and ``failed`` jobs past their ``expires_at`` become ``expired``.

Such jobs are never claimed anyway (``ready()`` skips them); marking them records
``finished_at``, frees their unique key and lets the cleaner prune them. In batches, each one
UPDATE in its own short transaction; a job claimed meanwhile is left alone (the UPDATE re-checks
its status).
"""

from dataclasses import dataclass

from ..conf import QueueSettings
from ..models import Job
from .steps import check, positive, run_batches

_defaults = QueueSettings()


@dataclass(frozen=True)
class ExpirerConfig:
    # Jobs expired per statement, each batch its own transaction (MAINTENANCE_BATCH_SIZE).
    batch_size: int = _defaults.MAINTENANCE_BATCH_SIZE
    # PostgreSQL: time limit of each batch's statements (None: none).
    statement_timeout_seconds: float | None = _defaults.MAINTENANCE_STATEMENT_TIMEOUT_SECONDS

    def __post_init__(self):
        check(self, positive(self, "batch_size")
              + positive(self, "statement_timeout_seconds", none_allowed=True))


@dataclass(frozen=True)
class ExpirerResult:
    expired: int = 0
    batches: int = 0


class Expirer:
    def __init__(self, config: ExpirerConfig | None = None, *, alias: str):
        self.config = config or ExpirerConfig()
        self.alias = alias

    def run_once(self, now=None, *, keep_going=None) -> ExpirerResult:
        """Expire every job past its ``expires_at`` ("now": the database's clock, or ``now``)."""
        size = self.config.batch_size
        expired, batches, _ = run_batches(
            self.alias, lambda: Job.objects.using(self.alias).expire(now, limit=size),
            size=size, statement_timeout=self.config.statement_timeout_seconds,
            keep_going=keep_going,
        )
        return ExpirerResult(expired=expired, batches=batches)
