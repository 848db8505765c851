"""``Job.objects.stats()``: per queue, jobs by status and how far behind the queue is."""

from dataclasses import dataclass, field

from django.db.models import Count, Min
from django.utils import timezone

from ..statuses import JobStatus


@dataclass
class QueueStats:
    """Counts by status for one queue, and how far behind it is."""

    queue: str
    counts: dict = field(default_factory=dict)
    oldest_ready_at: object = None  # run_at of the oldest job that is due now, if any
    lag_seconds: float | None = None  # how long that job has been waiting past its run_at

    @property
    def waiting(self) -> int:
        """Queued plus failed-awaiting-retry, due or not (``ready()`` is the due ones)."""
        return self.counts.get(JobStatus.QUEUED, 0) + self.counts.get(JobStatus.FAILED, 0)


def queue_stats(jobs, now=None) -> dict:
    """``{queue: QueueStats}`` of the queryset ``jobs``: counts per status, and the lag of the
    oldest ready job."""
    now = now or timezone.now()
    by_queue: dict = {}
    rows = jobs.values_list("queue", "status").annotate(n=Count("pk")).order_by()
    for queue, status, count in rows:
        by_queue.setdefault(queue, QueueStats(queue)).counts[status] = count
    oldest = jobs.ready(now).values_list("queue").annotate(oldest=Min("run_at")).order_by()
    for queue, oldest_ready_at in oldest:
        stats = by_queue.setdefault(queue, QueueStats(queue))
        stats.oldest_ready_at = oldest_ready_at
        stats.lag_seconds = max((now - oldest_ready_at).total_seconds(), 0.0)
    return dict(sorted(by_queue.items()))
