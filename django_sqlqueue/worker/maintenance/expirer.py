"""The expirer: ``queued`` and ``failed`` jobs past their ``expires_at`` become ``expired``.

Such jobs are never claimed anyway (``ready()`` skips them); marking them records
``finished_at``, frees their unique key and lets the cleaner prune them. In batches, each one
UPDATE in its own short transaction; a job claimed meanwhile is left alone (the UPDATE re-checks
its status).
"""

from dataclasses import dataclass

from ...models import Job
from .steps import BatchConfig, BatchStep


class ExpirerConfig(BatchConfig):
    """The expirer's batch size and statement timeout."""


@dataclass(frozen=True)
class ExpirerResult:
    expired: int = 0
    batches: int = 0


class Expirer(BatchStep):
    """Expires every job past its ``expires_at``; ``run_once`` returns an ``ExpirerResult``."""

    config_class = ExpirerConfig
    result_class = ExpirerResult

    def batch(self, now, size: int) -> int:
        return Job.objects.using(self.alias).expire(now, limit=size)
