"""Orphans: waiting jobs whose parents are gone, settled as if those parents were deleted.

Deleting a workflow's job through the ORM settles the jobs waiting for it
(transitions/deleted.py). A row deleted another way (raw SQL, ``delete_in_batches`` of unfinished
jobs, a restore that left edges behind) leaves its children's edges unresolved, and the children
``waiting`` for ever. This step finds the unresolved edges whose parent row no longer exists and
settles their children as a deleted parent's would (``settle_deleted``): cancelled with the
reason, or released where the edge has ``run_anyway``.

It reads the edges table without an index of its own (one on ``resolved_at`` would cost a write
per edge for a repair that is rarely needed), so the service runs it once per complete sweep of
the cleaner, at most every ``PRUNE_INTERVAL_SECONDS``; in batches of parents, each its own short
transaction.
"""

import logging
from dataclasses import dataclass

from django.db.models import Exists, OuterRef

from ...models import Job, JobDependency
from ...transitions.deleted import settle_deleted
from .steps import BatchConfig, BatchStep

logger = logging.getLogger("django_sqlqueue.worker.maintenance")


class OrphansConfig(BatchConfig):
    """Parents gone settled per batch, and each batch's statement timeout."""


@dataclass(frozen=True)
class OrphansResult:
    parents: int = 0  # parents found gone whose edges were unresolved
    batches: int = 0


class Orphans(BatchStep):
    """Settle the children of every parent gone (``run_once``, batch by batch)."""

    config_class = OrphansConfig
    result_class = OrphansResult

    def batch(self, now, size: int) -> int:
        gone = list(
            JobDependency.objects.using(self.alias).filter(resolved_at__isnull=True)
            .exclude(Exists(Job.objects.using(self.alias).filter(pk=OuterRef("parent_id"))))
            .order_by("parent_id").values_list("parent_id", flat=True).distinct()[:size])
        if gone:
            settle_deleted(Job, self.alias, gone)
            logger.warning("maintenance settled the jobs waiting for %s job(s) that no longer "
                           "exist (deleted without the ORM?): ids %s", len(gone),
                           ", ".join(map(str, gone[:10])) + (" ..." if len(gone) > 10 else ""))
        return len(gone)
