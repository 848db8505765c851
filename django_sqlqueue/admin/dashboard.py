"""The queue dashboard: per queue, jobs by status, lag, live workers, and throughput over the last
hour as a chart.

Throughput counts jobs by their ``finished_at``: *succeeded* per minute, and *failed* per minute
meaning jobs that ended ``exhausted`` in that minute. A failed attempt that will be retried leaves
no finished_at (its error is only an entry in the job's ``errors``), and reading every job's
errors to count those would be far too expensive; the page says so under the chart.

Queries: two for ``Job.objects.stats()``, one for throughput, one for the workers, and those of
``queue_control.states`` (pauses, limits, and what waiting jobs wait for).
"""

import datetime as dt
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.db.models import Count
from django.db.models.functions import TruncMinute
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from .. import queue_control
from ..conf import get_settings
from ..models import Job, Worker
from ..statuses import JobStatus
from .chart import throughput_svg
from .display import STATUS_COLOURS, STATUS_ORDER, seconds_text, status_label
from .workers import DEAD, heartbeat_state, serves

WINDOW_MINUTES = 60
LAG_WARNING_SECONDS = 60
LAG_ALERT_SECONDS = 600
LEVELS = ["alert", "warn", "ok"]


@dataclass
class QueueCard:
    name: str
    counts: dict
    lag_seconds: float | None = None
    buckets: list = field(default_factory=list)
    workers: int = 0
    bars: list = field(default_factory=list)  # (label, count, colour, width %, list url)
    chart: str = ""
    list_url: str = ""
    # From the Queue table (queue_control.states): paused, limits, what the ready jobs wait for.
    paused: bool = False
    limits: str = "none"
    waiting_on: list = field(default_factory=list)

    @property
    def waiting(self) -> int:
        return self.counts.get(JobStatus.QUEUED, 0) + self.counts.get(JobStatus.FAILED, 0)

    @property
    def lag_text(self) -> str:
        if self.lag_seconds is None:
            return "none due"
        return seconds_text(self.lag_seconds, coarse=True)

    @property
    def lag_level(self) -> str:
        if self.lag_seconds is None or self.lag_seconds < LAG_WARNING_SECONDS:
            return "ok"
        return "warn" if self.lag_seconds < LAG_ALERT_SECONDS else "alert"

    @property
    def unserved(self) -> bool:
        """Jobs are due and no live worker takes this queue: nothing will run them."""
        return self.lag_seconds is not None and not self.workers


def throughput(now, minutes=WINDOW_MINUTES):
    """``(start, {queue: [[succeeded, failed] per minute]})`` for the last ``minutes``."""
    start = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=minutes - 1)
    rows = (
        Job.objects.filter(
            status__in=[JobStatus.SUCCEEDED, JobStatus.EXHAUSTED],
            finished_at__gte=start, finished_at__lte=now,
        )
        .annotate(minute=TruncMinute("finished_at"))
        .values_list("queue", "status", "minute")
        .annotate(n=Count("pk"))
        .order_by()
    )
    per_queue: dict = {}
    for queue, status, minute, n in rows:
        index = int((minute - start).total_seconds() // 60)
        if 0 <= index < minutes:
            buckets = per_queue.setdefault(queue, [[0, 0] for _ in range(minutes)])
            buckets[index][0 if status == JobStatus.SUCCEEDED else 1] += n
    return start, per_queue


def build(list_url: str, now=None) -> dict:
    now = now or timezone.now()
    stats = Job.objects.stats(now)
    start, per_queue = throughput(now)
    workers = list(Worker.objects.all())
    states = {worker.pk: heartbeat_state(worker, now) for worker in workers}
    live = [w for w in workers if states[w.pk] != DEAD]
    # Running and waiting as counted above: the states add the Queue rows' query (and, for
    # queues with limits, what their waiting jobs wait on).
    controls = {state.name: state for state in queue_control.states(
        now=now, running={name: s.counts.get(JobStatus.RUNNING, 0) for name, s in stats.items()},
        ready={name: s.waiting for name, s in stats.items()})}
    cards = []
    for name in sorted(set(stats) | set(per_queue) | set(controls)):
        queue_stats = stats.get(name)
        card = QueueCard(
            name=name,
            counts=dict(queue_stats.counts) if queue_stats else {},
            lag_seconds=queue_stats.lag_seconds if queue_stats else None,
            buckets=per_queue.get(name, [[0, 0] for _ in range(WINDOW_MINUTES)]),
            workers=sum(1 for w in live if serves(w, name)),
            list_url=f"{list_url}?{urlencode({'queue': name})}",
        )
        state = controls.get(name)
        if state is not None:
            card.paused, card.limits = state.paused, state.limits
            card.waiting_on = [*state.waiting_on, *(
                f"key {key}: {reason}" for key, reason in sorted(state.keys_at_limit.items()))]
        card.bars = status_bars(card.counts, list_url, name)
        card.chart = throughput_svg(card.buckets, start, label=f"Throughput of queue {name}")
        cards.append(card)
    # Trouble first: queues nobody serves, then by how late they are, then by name.
    cards.sort(key=lambda c: (not c.unserved, LEVELS.index(c.lag_level), c.name))
    totals = {status: sum(c.counts.get(status, 0) for c in cards) for status in STATUS_ORDER}
    all_buckets = [
        [sum(c.buckets[i][0] for c in cards), sum(c.buckets[i][1] for c in cards)]
        for i in range(WINDOW_MINUTES)
    ]
    lags = [c.lag_seconds for c in cards if c.lag_seconds is not None]
    return {
        "cards": cards,
        "totals": status_bars(totals, list_url, None),
        "queued": totals[JobStatus.QUEUED],
        "running": totals[JobStatus.RUNNING],
        "retrying": totals[JobStatus.FAILED],
        "overall_chart": throughput_svg(all_buckets, start, label="Throughput of all queues"),
        "succeeded_hour": sum(b[0] for b in all_buckets),
        "failed_hour": sum(b[1] for b in all_buckets),
        "max_lag": seconds_text(max(lags), coarse=True) if lags else "none due",
        "max_lag_level": QueueCard("", {}, max(lags) if lags else None).lag_level,
        "workers_total": len(workers),
        "workers_live": len(live),
        "workers_dead": len(workers) - len(live),
        "unserved": [c.name for c in cards if c.unserved],
        "paused": [c.name for c in cards if c.paused],
        "lease_seconds": get_settings().LEASE_SECONDS,
        "now": now,
    }


def status_bars(counts: dict, list_url: str, queue) -> list:
    """One bar per status, as wide as its share of the largest count (at least a sliver)."""
    largest = max(list(counts.values()) + [1])
    bars = []
    for status in STATUS_ORDER:
        n = counts.get(status, 0)
        params = {"status__exact": status, **({"queue": queue} if queue else {})}
        width = 0 if not n else max(100 * n / largest, 1.5)
        bars.append((status_label(status), n, STATUS_COLOURS[status], f"{width:.1f}",
                     f"{list_url}?{urlencode(params)}"))
    return bars


def render(model_admin, request):
    site = model_admin.admin_site
    list_url = reverse("admin:django_sqlqueue_job_changelist", current_app=site.name)
    context = {
        **site.each_context(request),
        **build(list_url),
        "title": "Queue dashboard",
        "opts": model_admin.opts,
        "list_url": list_url,
        "workers_url": reverse("admin:django_sqlqueue_worker_changelist", current_app=site.name),
        "window_minutes": WINDOW_MINUTES,
    }
    request.current_app = site.name
    return TemplateResponse(request, "admin/django_sqlqueue/job/dashboard.html", context)
