"""The queue-level gauges, read from the database at each scrape: unfinished jobs by status,
ready depth and lag per queue and task, live workers per queue.

Any web process can serve them (views.py), so they need no worker to be up: which is the point
of an alert on "no live worker for a queue". Cheap because every query reads only what a
partial index holds: the waiting jobs (queued or failed-to-retry, the claim's index) and the
running ones (the rescuer's index), never the finished rows, which are most of a busy table.
Finished jobs are counted by the workers instead (metrics.py: ``sqlqueue_jobs_finished_total``).
At 1M finished rows these queries take about a millisecond; their cost grows with the jobs
waiting or running (docs/observability.md has the measurements).
"""

import datetime as dt

from django.db.models import Count, Min, Q

from ..conf import get_settings
from ..db.clock import database_now
from ..models import Job, Worker
from ..statuses import JobStatus
from . import fleet
from .replica import replica_state


class QueueMetricsCollector:
    """A prometheus_client collector: register it with a ``CollectorRegistry``; each
    ``collect()`` runs three queries on ``alias``."""

    def __init__(self, alias: str):
        self.alias = alias

    def describe(self):
        return []  # nothing to check at registration, and no query then

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        now = database_now(self.alias)
        jobs = GaugeMetricFamily("sqlqueue_jobs", "Unfinished jobs by status (queued, failed: "
                                 "waiting for a retry, running).", labels=["queue", "task",
                                                                           "status"])
        ready = GaugeMetricFamily("sqlqueue_jobs_ready", "Jobs due to run now and waiting for a "
                                  "worker (queued or failed, run_at passed).",
                                  labels=["queue", "task"])
        lag = GaugeMetricFamily("sqlqueue_jobs_lag_seconds", "Age of the oldest due job: how "
                                "long it has waited past its run_at (0: none is due).",
                                labels=["queue", "task"])
        queues = set()
        due, oldest_due = {}, {}  # (queue, task) -> of its queued and failed rows together
        for row in self._waiting(now):
            queues.add(row["queue"])
            key = (row["queue"], row["task_name"])
            jobs.add_metric([*key, row["status"]], row["jobs"])
            due[key] = due.get(key, 0) + row["due"]
            if row["oldest_due"] is not None:
                oldest_due[key] = min(oldest_due.get(key, row["oldest_due"]), row["oldest_due"])
        for key, count in due.items():
            ready.add_metric(key, count)
            oldest = oldest_due.get(key)
            lag.add_metric(key, max((now - oldest).total_seconds(), 0.0) if oldest else 0.0)
        for row in self._running():
            queues.add(row["queue"])
            jobs.add_metric([row["queue"], row["task_name"], JobStatus.RUNNING], row["jobs"])
        yield from (jobs, ready, lag)
        yield from self._workers(now, queues)
        yield from self._autoscale()
        replica = replica_state(self.alias)  # SQLQUEUE["READ_DATABASE"], a standby
        if replica is not None and replica.age_seconds is not None:
            age = GaugeMetricFamily("sqlqueue_replica_age_seconds", "These gauges are read from "
                                    "a replica: how long ago the last change it replayed was "
                                    "committed on the primary.")
            age.add_metric([], replica.age_seconds)
            yield age

    def _waiting(self, now):
        """Queued and failed jobs by queue, task and status; due ones apart. The filter is the
        partial index's own condition, so PostgreSQL reads the waiting rows only."""
        due = Q(run_at__lte=now)
        return (Job.objects.using(self.alias).in_ready_status()
                .values("queue", "task_name", "status")
                .annotate(jobs=Count("pk"), due=Count("pk", filter=due),
                          oldest_due=Min("run_at", filter=due))
                .order_by())

    def _running(self):
        return (Job.objects.using(self.alias).running().values("queue", "task_name")
                .annotate(jobs=Count("pk")).order_by())

    def _workers(self, now, queues):
        from prometheus_client.core import GaugeMetricFamily

        default_lease = get_settings().LEASE_SECONDS
        live = []
        for worker in Worker.objects.using(self.alias).only(
                "queues", "concurrency", "last_heartbeat_at", "lease_seconds"):
            # A worker beats every third of its lease: a lease without a beat, and it is late.
            lease = dt.timedelta(seconds=worker.lease_seconds or default_lease)
            if worker.last_heartbeat_at + lease >= now:
                live.append(worker)
                queues.update(worker.queues)
        total = GaugeMetricFamily("sqlqueue_live_workers", "Worker processes whose heartbeat "
                                  "is recent (within their lease).")
        total.add_metric([], len(live))
        per_queue = GaugeMetricFamily("sqlqueue_queue_live_workers", "Live worker processes "
                                      "that serve the queue (named, or serving every queue).",
                                      labels=["queue"])
        slots = GaugeMetricFamily("sqlqueue_queue_live_worker_slots", "Job threads of the live "
                                  "workers that serve the queue.", labels=["queue"])
        for queue in sorted(queues):
            serving = [w for w in live if not w.queues or queue in w.queues]
            per_queue.add_metric([queue], len(serving))
            slots.add_metric([queue], sum(w.concurrency for w in serving))
        yield from (total, per_queue, slots)

    def _autoscale(self):
        """The fleet-wide autoscaling signals (fleet.py; docs/autoscaling.md): what an HPA or
        KEDA scales a deployment of workers on."""
        from prometheus_client.core import GaugeMetricFamily

        reading = fleet.measure(self.alias)
        for name, text, value in [
            ("sqlqueue_autoscale_desired_processes", "Worker processes the work wants now: "
             "every running and due job on a slot, one more than live while the oldest due job "
             "waits past AUTOSCALE_TARGET_WAIT_SECONDS (docs/autoscaling.md).",
             reading.desired()),
            ("sqlqueue_autoscale_oldest_due_age_seconds", "How long the oldest due job of any "
             "queue has waited for a slot (0: none is due).", reading.oldest_due_age or 0.0),
            ("sqlqueue_autoscale_busy_share", "Running jobs over the job slots of the live "
             "workers, from 0 to 1.", reading.busy_share),
        ]:
            gauge = GaugeMetricFamily(name, text)
            gauge.add_metric([], value)
            yield gauge
