"""The queue dashboard: per queue, jobs by state (scheduled apart from due), lag, live workers,
and throughput over 1 h (a chart, minute by minute), 24 h and 7 d; it refreshes itself.

Everything comes from ``snapshot.take()`` (six cheap queries at any table size: see
observability/snapshot.py). The page polls ``dashboard/data/``, a JSON endpoint with the same view
permission, every ``REFRESH_SECONDS``: it answers the snapshot as JSON and the page's changing part
as HTML, which ``static/django_sqlqueue/dashboard.js`` puts in place (a static file, not an inline
script, so that a Content-Security-Policy without 'unsafe-inline' allows it).

"Failed" in the throughput means jobs that *ended* ``exhausted``; a failed attempt that will be
retried shows as "failed, will retry" in the counts instead.

A tile gives the job table's size and how many things ``manage.py tablehealth`` advises
(observability/table_health.py, read at most once a minute).

Under the queues table, each ``runworker --autoscale`` supervisor's last changes
(models.ScaleEvent): when, from how many processes to how many, and why.

The per-queue table's columns are ``QUEUE_COLUMNS``: one ``Column`` each, so a new one (paused
queues, limits) is one line there.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.http import JsonResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.dateformat import time_format

from ..conf import get_settings
from ..models import Job, ScaleEvent
from ..observability import fleet, snapshot, table_health
from ..observability.replica import read_alias
from ..queues.control import QueueState, states
from ..statuses import JobStatus
from .chart import throughput_svg
from .display import BREADCRUMBS_AS_LIST, STATUS_COLOURS, seconds_text, status_label

REFRESH_SECONDS = 5
LAG_WARNING_SECONDS = 60
LAG_ALERT_SECONDS = 600
LEVELS = ["alert", "warn", "ok"]
LIVE_TEMPLATE = "admin/django_sqlqueue/job/dashboard_live.html"

#: Each state's label, colour and the job list's filter for it.
STATES = {
    "queued": ("Queued, due", STATUS_COLOURS[JobStatus.QUEUED],
               {"status__exact": JobStatus.QUEUED, "due": "now"}),
    snapshot.SCHEDULED: ("Scheduled", "#93b4e6",
                         {"status__exact": JobStatus.QUEUED, "due": "later"}),
    **{str(status): (status_label(status), STATUS_COLOURS[status], {"status__exact": status})
       for status in (JobStatus.WAITING, JobStatus.RUNNING, JobStatus.SUCCEEDED, JobStatus.FAILED,
                      JobStatus.EXHAUSTED, JobStatus.CANCELLED, JobStatus.EXPIRED)},
}


@dataclass
class QueueCard:
    """One queue as the page shows it."""

    queue: snapshot.QueueSnapshot
    list_url: str = ""
    # Its pause, limits and what its waiting jobs wait on (queues/control.py's states), if it has a
    # Queue row.
    control: QueueState | None = None
    bars: list = field(default_factory=list)  # (label, count, colour, width %, list url)
    chart: str = ""

    @property
    def name(self) -> str:
        return self.queue.name

    @property
    def paused(self) -> bool:
        return self.control is not None and self.control.paused

    @property
    def limits(self) -> str:
        return "none" if self.control is None else self.control.limits

    @property
    def waiting_on(self) -> str:
        """The pause, the limits and the keys at their limits that hold its ready jobs back."""
        if self.control is None:
            return "-"
        keys = [f"key {key}: {reason}" for key, reason in sorted(
            self.control.keys_at_limit.items())[:5]]
        return "; ".join([*self.control.waiting_on, *keys]) or "-"

    @property
    def counts(self) -> dict:
        return self.queue.counts

    @property
    def lag_text(self) -> str:
        lag = self.queue.lag_seconds
        return "none due" if lag is None else seconds_text(lag, coarse=True)

    @property
    def lag_level(self) -> str:
        """Red when nothing will run its due jobs (no live worker), else by how late it is."""
        if self.queue.unserved:
            return "alert"
        return lag_level(self.queue.lag_seconds)

    def done(self, window: str) -> int:
        counts = self.queue.throughput[window]
        return counts[JobStatus.SUCCEEDED] + counts[JobStatus.EXHAUSTED]

    def failed(self, window: str) -> int:
        return self.queue.throughput[window][JobStatus.EXHAUSTED]


def lag_level(seconds) -> str:
    if seconds is None or seconds < LAG_WARNING_SECONDS:
        return "ok"
    return "warn" if seconds < LAG_ALERT_SECONDS else "alert"


@dataclass(frozen=True)
class Column:
    """A column of the per-queue table: its heading, its cell for a card, and what it means."""

    heading: str
    cell: Callable[[QueueCard], object]
    help: str = ""
    level: Callable[[QueueCard], str] | None = None  # "ok", "warn" or "alert": the cell's colour


QUEUE_COLUMNS = [
    Column("Queued, due", lambda c: c.counts["queued"], "queued and due now"),
    Column("Scheduled", lambda c: c.counts[snapshot.SCHEDULED], "queued with a future run-at"),
    Column("Waiting", lambda c: c.counts["waiting"], "a workflow's jobs waiting for their "
           "parents"),
    Column("Running", lambda c: c.counts["running"]),
    Column("Failed, will retry", lambda c: c.counts[JobStatus.FAILED]),
    Column("Lag", lambda c: c.lag_text,
           "how long the oldest due job has waited past its run-at; red when no live worker "
           "takes the queue", level=lambda c: c.lag_level),
    Column("Live workers", lambda c: c.queue.live_workers,
           level=lambda c: "alert" if c.queue.unserved else "ok"),
    Column("Done 1 h", lambda c: c.done("1h"), "succeeded or ended exhausted"),
    Column("Failed 1 h", lambda c: c.failed("1h"), "ended exhausted",
           level=lambda c: "alert" if c.failed("1h") else "ok"),
    Column("Done 24 h", lambda c: c.done("24h")),
    Column("Done 7 d", lambda c: c.done("7d")),
    Column("State", lambda c: "paused" if c.paused else "active", "paused: no worker claims "
           "its jobs (manage.py queues resume)", level=lambda c: "warn" if c.paused else "ok"),
    Column("Limits", lambda c: c.limits, "running at once and starts per period, of the queue "
           "and per concurrency key (docs/limits.md)"),
    Column("Waiting on", lambda c: c.waiting_on, "what holds its ready jobs back"),
]


def build(list_url: str, now=None, *, alias: str = "default") -> dict:
    """The page's context, and the snapshot it came from (``"snapshot"``)."""
    snap = snapshot.take(alias=alias, now=now or timezone.now())
    # The Queue rows, with the counts of the snapshot (one more query; a limited queue adds
    # one or two to count what waits on its limits).
    controls = {state.name: state for state in states(
        using=alias, now=now,
        running={queue.name: queue.counts["running"] for queue in snap.queues},
        ready={queue.name: queue.counts["queued"] for queue in snap.queues})}
    cards = []
    for queue in snap.queues:
        card = QueueCard(queue, list_url=f"{list_url}?{urlencode({'queue': queue.name})}",
                         control=controls.get(queue.name))
        card.bars = status_bars(queue.counts, list_url, queue.name)
        card.chart = throughput_svg(queue.per_minute, snap.minute_start,
                                    label=f"Throughput of queue {queue.name}")
        cards.append(card)
    # Trouble first: queues nobody serves, then by how late they are, then by name.
    cards.sort(key=lambda c: (not c.queue.unserved, LEVELS.index(c.lag_level), c.name))
    totals = {state: sum(c.counts[state] for c in cards) for state in snapshot.STATES}
    all_minutes = [[sum(c.queue.per_minute[i][k] for c in cards) for k in (0, 1)]
                   for i in range(len(cards[0].queue.per_minute) if cards else 60)]
    windows = {window: {"done": sum(c.done(window) for c in cards),
                        "failed": sum(c.failed(window) for c in cards)}
               for window in ("1h", "24h", "7d")}
    lags = [c.queue.lag_seconds for c in cards if c.queue.lag_seconds is not None]
    live = snap.live_workers
    scaling = fleet.from_snapshot(snap)
    return {
        "snapshot": snap,
        "cards": cards,
        "columns": QUEUE_COLUMNS,
        "rows": [(card, [(column, column.cell(card),
                          column.level(card) if column.level else "") for column in QUEUE_COLUMNS])
                 for card in cards],
        "totals": status_bars(totals, list_url, None),
        "queued": totals["queued"],
        "scheduled": totals[snapshot.SCHEDULED],
        "running": totals["running"],
        "retrying": totals[JobStatus.FAILED],
        "overall_chart": throughput_svg(all_minutes, snap.minute_start,
                                        label="Throughput of all queues"),
        "windows": windows,
        "estimated": snap.estimated,
        "max_lag": seconds_text(max(lags), coarse=True) if lags else "none due",
        "max_lag_level": ("alert" if any(c.queue.unserved for c in cards)
                          else lag_level(max(lags) if lags else None)),
        "workers_total": len(snap.workers),
        "workers_live": len(live),
        "workers_dead": len(snap.workers) - len(live),
        # What an autoscaler would want (docs/autoscaling.md), from the same snapshot.
        "desired_processes": scaling.desired(),
        "busy_percent": round(100 * scaling.busy_share),
        # The last changes of each `runworker --autoscale` supervisor (one small read).
        "scale_events": ScaleEvent.objects.using(alias).by_supervisor(),
        # Running jobs asked to cancel whose workers have not stopped them yet: read from the
        # (small) running set, and only while some job runs.
        "cancelling": (Job.objects.using(alias).cancelling().count() if totals["running"]
                       else 0),
        "unserved": [c.name for c in cards if c.queue.unserved],
        # The job table's size and what `manage.py tablehealth` advises, read at most once a
        # minute; not from a replica, whose statistics and sessions are its own.
        "table_health": (None if snap.replica is not None
                         else table_health.recent(alias)),
        "lease_seconds": get_settings().LEASE_SECONDS,
        "now": snap.taken_at,
        "read_from": snap.database,
        "replica": snap.replica,
    }


def status_bars(counts: dict, list_url: str, queue) -> list:
    """One bar per state, as wide as its share of the largest count (at least a sliver)."""
    largest = max(list(counts.values()) + [1])
    bars = []
    for state, (label, colour, params) in STATES.items():
        n = counts.get(state, 0)
        query = {**params, **({"queue": queue} if queue else {})}
        width = 0 if not n else max(100 * n / largest, 1.5)
        bars.append((label, n, colour, f"{width:.1f}", f"{list_url}?{urlencode(query)}"))
    return bars


def _context(model_admin, request) -> dict:
    site = model_admin.admin_site
    list_url = reverse("admin:django_sqlqueue_job_changelist", current_app=site.name)
    request.current_app = site.name
    return {
        # SQLQUEUE["READ_DATABASE"] (a replica), else where the routers send reads of Job.
        **build(list_url, alias=read_alias(model_admin.get_queryset(request).db)),
        "opts": model_admin.opts,
        "list_url": list_url,
        "workers_url": reverse("admin:django_sqlqueue_worker_changelist", current_app=site.name),
        "data_url": reverse("admin:django_sqlqueue_job_dashboard_data", current_app=site.name),
        "refresh_seconds": REFRESH_SECONDS,
        "breadcrumbs_as_list": BREADCRUMBS_AS_LIST,
    }


def render(model_admin, request):
    """The page."""
    context = {**model_admin.admin_site.each_context(request), **_context(model_admin, request),
               "title": "Queue dashboard"}
    return TemplateResponse(request, "admin/django_sqlqueue/job/dashboard.html", context)


#: How the page says when its figures were taken ("Updated 21:42:32"), in the page and after
#: each refresh.
UPDATED_FORMAT = "H:i:s"


def data(model_admin, request):
    """The endpoint the page polls: ``{"snapshot": ..., "html": ..., "updated": "21:42:32"}``."""
    context = _context(model_admin, request)
    return JsonResponse({  # not cached: admin_view adds never_cache
        "snapshot": context["snapshot"].as_json(),
        "html": render_to_string(LIVE_TEMPLATE, context, request),
        # As the page writes it (the time filter: the current time zone, 24 hours), not in the
        # browser's own format, which changed "21:42:32" into "9:42:42 PM" at the first refresh.
        "updated": time_format(timezone.localtime(context["now"]), UPDATED_FORMAT),
    })
