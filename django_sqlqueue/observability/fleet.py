"""The autoscaler's measurements across every worker and host, read from the database: per queue
the due jobs, the running ones and the age of the oldest due job; the live worker processes and
their slots, hence the busy share. ``runworker --autoscale`` reads it every few seconds, the
``sqlqueue_autoscale_*`` gauges at each scrape, ``manage.py stats --json`` once.

Cheap at any table size: the database's clock, one aggregate of the waiting rows through the
ready index, one of the running rows through the lease index (never the finished rows), and the
Worker rows (one per live process). docs/autoscaling.md gives the same reading as one SQL
statement for KEDA's PostgreSQL scaler, and tests/integration/test_fleet_query.py holds the two
to the same answer.
"""

import datetime as dt
import sys
from dataclasses import dataclass, field

from django.db.models import Count, Min, Q

from ..conf import get_settings
from ..db.clock import database_now
from ..models import Job, Worker
from .autoscale import Measurements, QueueLoad, QueueTotals, ScaleSettings, desired_processes
from .liveness import ALIVE, serves

#: Job slots per process assumed while no worker is alive to say (runworker's --concurrency
#: default), so that scale-from-zero still has a number.
DEFAULT_CONCURRENCY = 8


@dataclass
class Fleet(QueueTotals):
    """One reading. ``processes`` and ``slots`` count the live workers serving the queues read."""

    taken_at: dt.datetime  # by the database's clock
    queues: tuple = ()  # of autoscale.QueueLoad, by name
    processes: int = 0
    slots: int = 0
    done: dict = field(default_factory=dict)  # live worker name -> attempts it has run
    busy: set = field(default_factory=set)  # (host, pid) of the live workers running a job

    @property
    def busy_share(self) -> float:
        return min(self.running / self.slots, 1.0) if self.slots else 0.0

    @property
    def concurrency(self) -> int:
        """Slots per live process (their mean, rounded up)."""
        return -(-self.slots // self.processes) if self.processes else DEFAULT_CONCURRENCY

    def measurements(self, *, at: float, processes: int | None = None,
                     concurrency: int | None = None, arrivals: float | None = None,
                     completions: float | None = None) -> Measurements:
        """As the decision takes them; ``processes``/``concurrency``: a scaler's own, else the
        fleet's."""
        return Measurements(
            at=at, processes=self.processes if processes is None else processes,
            concurrency=concurrency or self.concurrency, queues=self.queues,
            busy_share=self.busy_share, arrivals_per_second=arrivals,
            completions_per_second=completions,
        )

    def desired(self, settings: ScaleSettings | None = None) -> int:
        """Processes the fleet's work wants (autoscale.desired_processes), by default with no
        bounds but zero: a platform's autoscaler applies its own minimum and maximum."""
        return desired_processes(self.measurements(at=0.0), settings or unbounded())

    def as_json(self) -> dict:
        """The ``autoscale`` part of ``manage.py stats --json`` (docs/autoscaling.md)."""
        oldest = self.oldest_due_age
        return {
            "desired_processes": self.desired(),
            "live_processes": self.processes,
            "live_slots": self.slots,
            "busy_share": round(self.busy_share, 3),
            "due": self.due,
            "running": self.running,
            "oldest_due_age_seconds": None if oldest is None else round(oldest, 3),
            "target_wait_seconds": get_settings().AUTOSCALE_TARGET_WAIT_SECONDS,
            "queues": [{"name": q.queue, "due": q.due, "running": q.running,
                        "oldest_due_age_seconds": None if q.oldest_due_age is None
                        else round(q.oldest_due_age, 3)} for q in self.queues],
        }


def unbounded() -> ScaleSettings:
    """The settings of the fleet-wide figure: from zero, no maximum, the configured target wait
    and cool-down."""
    conf = get_settings()
    return ScaleSettings(minimum=0, maximum=sys.maxsize,
                         target_wait=conf.AUTOSCALE_TARGET_WAIT_SECONDS,
                         cooldown=conf.AUTOSCALE_COOLDOWN_SECONDS)


def measure(alias: str = "default", queues=None) -> Fleet:
    """Read the fleet now: the jobs of ``queues`` (None: every queue) and the live workers that
    serve any of them."""
    now = database_now(alias)
    jobs = Job.objects.using(alias)
    if queues is not None:
        jobs = jobs.filter(queue__in=list(queues))
    loads: dict = {}
    due = Q(run_at__lte=now) & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    waiting = (jobs.in_ready_status().values_list("queue")
               .annotate(due=Count("pk", filter=due), oldest=Min("run_at", filter=due))
               .order_by())
    for name, n, oldest in waiting:
        age = None if oldest is None else max((now - oldest).total_seconds(), 0.0)
        loads[name] = QueueLoad(name, due=n, oldest_due_age=age if n else None)
    running_by = {}  # worker name -> its running jobs
    for name, worker, n in (jobs.running().values_list("queue", "claimed_by")
                            .annotate(n=Count("pk")).order_by()):
        load = loads.get(name, QueueLoad(name))
        loads[name] = QueueLoad(name, due=load.due, running=load.running + n,
                                oldest_due_age=load.oldest_due_age)
        running_by[worker] = running_by.get(worker, 0) + n
    live = [w for w in _live_workers(alias, now)
            if queues is None or any(serves(w, q) for q in queues)]
    return Fleet(taken_at=now, queues=tuple(loads[name] for name in sorted(loads)),
                 processes=len(live), slots=sum(w.concurrency for w in live),
                 done={w.name: w.jobs_done for w in live},
                 busy={(w.host, w.pid) for w in live if running_by.get(w.name)})


def from_snapshot(snap) -> Fleet:
    """The same reading from a dashboard snapshot (observability/snapshot.py), with no query of
    its own: its due and running counts and lags, and the workers it does not presume dead."""
    live = [w for w in snap.live_workers if w.state == ALIVE]
    return Fleet(taken_at=snap.taken_at, queues=tuple(
        QueueLoad(q.name, due=q.counts["queued"], running=q.counts["running"],
                  oldest_due_age=q.lag_seconds) for q in snap.queues),
        processes=len(live), slots=sum(w.concurrency for w in live),
        done={w.name: w.jobs_done for w in live})


def _live_workers(alias, now) -> list:
    """Workers whose last heartbeat is at most one of their leases old."""
    default_lease = get_settings().LEASE_SECONDS
    return [w for w in Worker.objects.using(alias).only(
                "name", "host", "pid", "queues", "concurrency", "jobs_done",
                "last_heartbeat_at", "lease_seconds")
            if w.last_heartbeat_at + dt.timedelta(seconds=w.lease_seconds or default_lease) >= now]
