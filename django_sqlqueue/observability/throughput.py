"""Throughput: how many jobs ended, per queue and final status, in the last hour (minute by
minute), 24 hours and 7 days.

Read from two places that never overlap: ThroughputCount, the rollup of every job that finished
before the rollup's cursor (worker/maintenance/rollup.py, on the maintenance leader), and the job
table for those that finished since (a few minutes' worth, found through the
``sqlqueue_job_finished`` index). Three small queries whatever the size of the table. Read them in
one snapshot (``snapshot.py`` does), or the cursor may move between them.

The windows are whole minutes and hours: "1 h" is the current minute and the 59 before it,
"24 h" the current hour and the 23 before it, "7 d" the current hour and the 167 before it. Rows
deleted from the job table (pruned, or by hand) stay counted once rolled up.
"""

import datetime as dt
from dataclasses import dataclass, field

from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncMinute

from ..models import Job, ThroughputCount, ThroughputCursor
from ..statuses import FINISHED_STATUSES, JobStatus

MINUTES = 60  # the per-minute window
WINDOWS = ("1h", "24h", "7d")
#: What the per-minute chart counts: jobs that succeeded, and jobs that failed for good.
CHART_STATUSES = (JobStatus.SUCCEEDED, JobStatus.EXHAUSTED)


@dataclass
class Throughput:
    minute_start: dt.datetime  # the start of the first of the MINUTES minutes
    # {queue: [[succeeded, exhausted] for each minute]}
    per_minute: dict = field(default_factory=dict)
    # {queue: {"1h" | "24h" | "7d": {final status: jobs}}}
    totals: dict = field(default_factory=dict)
    rolled_up_to: dt.datetime | None = None  # None: no rollup yet, all read from the jobs

    def minutes(self, queue: str) -> list:
        return self.per_minute.get(queue) or [[0, 0] for _ in range(MINUTES)]

    def window(self, queue: str, name: str) -> dict:
        """{final status: jobs}, every final status (0 for none)."""
        counts = self.totals.get(queue, {}).get(name, {})
        return {str(status): counts.get(status, 0) for status in FINISHED_STATUSES}

    def _add(self, queue, window, status, n):
        if n:
            windows = self.totals.setdefault(queue, {name: {} for name in WINDOWS})
            windows[window][status] = windows[window].get(status, 0) + n

    def _add_minute(self, queue, index, status, n):
        if 0 <= index < MINUTES and status in CHART_STATUSES:
            buckets = self.per_minute.setdefault(queue, [[0, 0] for _ in range(MINUTES)])
            buckets[index][CHART_STATUSES.index(status)] += n


def read(now: dt.datetime, *, alias: str = "default") -> Throughput:
    """Throughput up to ``now`` (an aware datetime)."""
    minute_start = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=MINUTES - 1)
    this_hour = now.replace(minute=0, second=0, microsecond=0)
    day_start = this_hour - dt.timedelta(hours=23)
    week_start = this_hour - dt.timedelta(hours=24 * 7 - 1)
    end = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    result = Throughput(minute_start)
    cursor = (ThroughputCursor.objects.using(alias).filter(pk=1)
              .values_list("rolled_up_to", flat=True).first())
    result.rolled_up_to = cursor
    counts = ThroughputCount.objects.using(alias)
    if cursor is not None and cursor > week_start:
        hours = (
            counts.filter(period_seconds=ThroughputCount.HOUR, bucket_at__gte=week_start)
            .values_list("queue", "status")
            .annotate(week=Sum("count"), day=Sum("count", filter=Q(bucket_at__gte=day_start)))
            .order_by()
        )
        for queue, status, week, day in hours:
            result._add(queue, "7d", status, week)
            result._add(queue, "24h", status, day or 0)
        minutes = (
            counts.filter(period_seconds=ThroughputCount.MINUTE, bucket_at__gte=minute_start)
            .values_list("queue", "status", "bucket_at")
            .annotate(n=Sum("count"))
            .order_by()
        )
        for queue, status, bucket_at, n in minutes:
            result._add(queue, "1h", status, n)
            result._add_minute(queue, _index(bucket_at, minute_start), status, n)
    tail_start = week_start if cursor is None else max(cursor, week_start)
    tail = (
        Job.objects.using(alias)
        .filter(finished_at__gte=tail_start, finished_at__lt=end, status__in=FINISHED_STATUSES)
        .annotate(minute=TruncMinute("finished_at"))
        .values_list("queue", "status", "minute")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for queue, status, minute, n in tail:
        result._add(queue, "7d", status, n)
        if minute >= day_start:
            result._add(queue, "24h", status, n)
        if minute >= minute_start:
            result._add(queue, "1h", status, n)
            result._add_minute(queue, _index(minute, minute_start), status, n)
    return result


def _index(minute: dt.datetime, minute_start: dt.datetime) -> int:
    return int((minute - minute_start).total_seconds() // 60)
