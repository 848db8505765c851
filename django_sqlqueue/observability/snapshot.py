"""What the queues look like now: per queue, jobs by state, lag, live workers and throughput; the
one reading behind the admin dashboard, its JSON endpoint and ``manage.py stats``.

Cheap at millions of rows, in about eight queries read in one snapshot (on PostgreSQL a
repeatable-read transaction, so the throughput's rollup and the job table agree):

- *queued* (due), *scheduled* (queued with a future ``run_at``), *failed, will retry* and the
  lag: through the partial index of ready jobs, so they cost what the waiting jobs cost;
- *running*: through the partial index of leases;
- the final states (*succeeded*, *exhausted*, *cancelled*, *expired*), which are most of a big
  table: counted exactly up to ``EXACT_LIMIT`` rows in the table;
- on PostgreSQL, past ``EXACT_LIMIT`` rows in the table, the final states, and the waiting ones
  too when the planner expects more than ``EXACT_LIMIT`` of them (a backlog), are estimated
  from one sample of about ``SAMPLE_ROWS`` rows' worth of pages, and listed in ``estimated``
  (an estimated lag is that of the oldest due job in the sample: a lower bound). SQLite always
  counts exactly;
- throughput: throughput.py;
- the workers;
- which database was read and, when it is a standby (``SQLQUEUE["READ_DATABASE"]``), how
  current it is: replica.py.
"""

import datetime as dt
from dataclasses import dataclass, field

from django.db import connections, transaction
from django.db.models import Count, Min, Q
from django.utils import timezone

from ..db import ops
from ..models import Job, Worker
from ..statuses import FINISHED_STATUSES, READY_STATUSES, JobStatus
from . import throughput
from .liveness import DEAD, heartbeat_state, serves
from .replica import ReplicaState, replica_state

SCHEDULED = "scheduled"
#: Every state counted, in the order shown: the life of a job, problems last. "queued" is due
#: now; "scheduled" is queued with a future run_at; "waiting", a workflow's job whose parents
#: have not all finished (docs/workflows.md).
STATES = ("queued", SCHEDULED, "waiting", "running", "succeeded", "failed", "exhausted",
          "cancelled", "expired")
FINISHED_STATES = tuple(str(status) for status in FINISHED_STATUSES)
EXACT_LIMIT = 200_000
SAMPLE_ROWS = 20_000


@dataclass
class QueueSnapshot:
    name: str
    counts: dict = field(default_factory=dict)  # {state: jobs}, every state of STATES
    lag_seconds: float | None = None  # how long its oldest due job has waited; None: none due
    oldest_due_at: dt.datetime | None = None
    live_workers: int = 0  # workers whose heartbeat is at most two leases old, taking this queue
    throughput: dict = field(default_factory=dict)  # {"1h" | "24h" | "7d": {final status: n}}
    per_minute: list = field(default_factory=list)  # [[succeeded, exhausted]] * 60, oldest first

    @property
    def unserved(self) -> bool:
        """Jobs are due and no live worker takes this queue: nothing will run them."""
        return self.lag_seconds is not None and not self.live_workers

    def per_minute_rate(self, minutes: int, current_seconds: float = 0.0) -> float:
        """Jobs that succeeded or failed for good per minute, over the last ``minutes`` whole
        minutes and the ``current_seconds`` of the current minute so far (its jobs counted
        over that part of a minute: 2,000 jobs that just finished are not a rate of 0)."""
        done = sum(s + f for s, f in self.per_minute[-1 - minutes:-1])
        if current_seconds <= 0:
            return done / minutes
        now_s, now_f = self.per_minute[-1]
        return (done + now_s + now_f) / (minutes + min(current_seconds, 60.0) / 60)

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "counts": self.counts,
            "lag_seconds": None if self.lag_seconds is None else round(self.lag_seconds, 3),
            "oldest_due_at": _iso(self.oldest_due_at),
            "live_workers": self.live_workers,
            "unserved": self.unserved,
            "throughput": self.throughput,
            "per_minute": self.per_minute,
        }


@dataclass
class Snapshot:
    taken_at: dt.datetime
    queues: list  # of QueueSnapshot, by name
    workers: list  # of Worker, each with a .state (liveness.ALIVE, LATE, DEAD)
    estimated: tuple = ()  # the states whose counts are estimates (and the lag, with "queued")
    minute_start: dt.datetime | None = None  # the first minute of per_minute
    rolled_up_to: dt.datetime | None = None
    database: str = "default"  # the alias read
    replica: ReplicaState | None = None  # when that is a standby: how current it is

    @property
    def live_workers(self) -> list:
        return [w for w in self.workers if w.state != DEAD]

    @property
    def current_minute_seconds(self) -> float:
        """How far into the last minute of ``per_minute`` (the current one) it was taken."""
        if self.minute_start is None:
            return 0.0
        current = self.minute_start + dt.timedelta(minutes=59)
        return max(0.0, (self.taken_at - current).total_seconds())

    def as_json(self) -> dict:
        """The document of ``manage.py stats --json`` and the dashboard's endpoint
        (docs/observability.md describes it)."""
        return {
            "taken_at": _iso(self.taken_at),
            "database": self.database,
            "replica": self.replica.as_json() if self.replica else None,
            "estimated": list(self.estimated),
            "minute_start": _iso(self.minute_start),
            "queues": [queue.as_json() for queue in self.queues],
            "workers": [
                {"name": w.name, "state": w.state, "queues": w.queues,
                 "concurrency": w.concurrency, "last_heartbeat_at": _iso(w.last_heartbeat_at),
                 "attempts_run": w.jobs_done}
                for w in self.workers
            ],
        }


def take(*, alias: str = "default", now: dt.datetime | None = None) -> Snapshot:
    """The queues now (``now``: tests pass a time; default the host's clock)."""
    now = now or timezone.now()
    connection = connections[alias]
    with transaction.atomic(using=alias):
        text = ops(connection).repeatable_read()
        if text and not _in_outer_transaction(connection):
            with connection.cursor() as cursor:
                cursor.execute(text, [])
        snap = _read(alias, now)
        snap.database, snap.replica = alias, replica_state(alias)
        return snap


def _in_outer_transaction(connection) -> bool:
    # atomic() just opened the transaction unless a caller's was open already (a savepoint).
    return len(connection.atomic_blocks) > 1


def _read(alias: str, now: dt.datetime) -> Snapshot:
    jobs = Job.objects.using(alias)
    queues: dict = {}

    def queue(name) -> QueueSnapshot:
        if name not in queues:
            queues[name] = QueueSnapshot(name, counts=dict.fromkeys(STATES, 0))
        return queues[name]

    rows_in_table, planned_waiting = _size(alias, jobs.in_ready_status())
    estimate_finished = rows_in_table > EXACT_LIMIT
    estimate_waiting = estimate_finished and planned_waiting > EXACT_LIMIT
    exact = (() if estimate_waiting else READY_STATUSES) + (
        () if estimate_finished else FINISHED_STATUSES)
    due = Q(run_at__lte=now)
    counted = (
        jobs.filter(status__in=exact)
        .values_list("queue", "status")
        .annotate(due=Count("pk", filter=due), later=Count("pk", filter=~due),
                  oldest=Min("run_at", filter=due & (Q(expires_at__isnull=True)
                                                     | Q(expires_at__gt=now))))
        .order_by()
    )
    rows = [(name, status, due_n, later_n, oldest) for name, status, due_n, later_n, oldest
            in counted]
    if estimate_finished:
        rows += _sampled(alias, now, rows_in_table, FINISHED_STATUSES + (
            READY_STATUSES if estimate_waiting else ()))
    for name, status, due_n, later_n, oldest in rows:
        snap = queue(name)
        if status == JobStatus.QUEUED:
            snap.counts["queued"] += due_n
            snap.counts[SCHEDULED] += later_n
        else:
            snap.counts[status] += due_n + later_n
        if status in READY_STATUSES and oldest is not None and (
                snap.oldest_due_at is None or oldest < snap.oldest_due_at):
            snap.oldest_due_at = oldest
            snap.lag_seconds = max((now - oldest).total_seconds(), 0.0)
    for name, n in jobs.running().values_list("queue").annotate(n=Count("pk")).order_by():
        queue(name).counts["running"] += n
    # Exact: the partial index sqlqueue_job_waiting holds only waiting jobs.
    for name, n in (jobs.filter(status=JobStatus.WAITING).values_list("queue")
                    .annotate(n=Count("pk")).order_by()):
        queue(name).counts["waiting"] += n
    estimated = ((("queued", SCHEDULED, "failed") if estimate_waiting else ())
                 + (FINISHED_STATES if estimate_finished else ()))

    reading = throughput.read(now, alias=alias)
    for name in reading.totals:
        queue(name)
    workers = list(Worker.objects.using(alias).order_by("name"))
    for worker in workers:
        worker.state = heartbeat_state(worker, now)
    live = [w for w in workers if w.state != DEAD]
    for snap in queues.values():
        snap.live_workers = sum(1 for w in live if serves(w, snap.name))
        snap.throughput = {name: reading.window(snap.name, name)
                           for name in throughput.WINDOWS}
        snap.per_minute = reading.minutes(snap.name)
    return Snapshot(
        taken_at=now, queues=[queues[name] for name in sorted(queues)], workers=workers,
        estimated=estimated, minute_start=reading.minute_start,
        rolled_up_to=reading.rolled_up_to,
    )


def _size(alias: str, waiting) -> tuple[float, float]:
    """PostgreSQL's estimates of (rows in the job table, rows ``waiting`` selects); (0, 0)
    elsewhere, or before the table was first analyzed."""
    driver = ops(connections[alias])
    if not driver.estimates_rows:
        return 0, 0
    rows_in_table = driver.table_row_estimate(Job)
    if rows_in_table <= EXACT_LIMIT:
        return rows_in_table, 0
    return rows_in_table, driver.query_row_estimate(waiting.values("pk"))


def _sampled(alias: str, now, rows_in_table: float, statuses) -> list:
    """(queue, status, due, later, oldest due run_at) rows estimated from a sample."""
    connection = connections[alias]
    percent = min(100.0, 100.0 * SAMPLE_ROWS / rows_in_table)
    with connection.cursor() as cursor:
        statement, params = ops(connection).sampled_status_counts(
            Job, now=now, percent=percent, statuses=statuses)
        cursor.execute(statement, params)
        sample = cursor.fetchall()
    rows = []
    for name, status, is_due, n, oldest in sample:
        scaled = round(n * 100.0 / percent)
        rows.append((name, status, scaled if is_due else 0, 0 if is_due else scaled,
                     oldest if is_due else None))
    return rows


def _iso(moment) -> str | None:
    return None if moment is None else moment.isoformat()
