"""The tables, one module per domain: ``job.py`` (Job: statuses and transitions are described
in docs/concepts.md; its queryset in ``job_queryset.py``), ``workers.py`` (Worker and Leader:
who is alive and who leads a cluster-wide duty), ``queue.py`` (Queue: pauses and limits),
``schedule.py`` (Schedule, docs/schedules.md), ``throughput.py`` (the finished-jobs rollup),
``dependency.py`` (JobDependency: a workflow's edges, docs/workflows.md), ``step.py`` (JobStep:
durable steps' results, docs/steps.md) and ``scale_event.py`` (ScaleEvent: the last changes of
each ``runworker --autoscale`` supervisor).
Every model is importable from here, as ``django_sqlqueue.models`` always offered them."""

from .dependency import JobDependency
from .job import Job, QueueDashboard
from .queue import Queue
from .scale_event import ScaleEvent
from .schedule import Schedule
from .step import JobStep
from .throughput import ThroughputCount, ThroughputCursor
from .workers import Leader, Worker

__all__ = ["Job", "JobDependency", "JobStep", "Leader", "Queue", "QueueDashboard", "ScaleEvent",
           "Schedule", "ThroughputCount", "ThroughputCursor", "Worker"]
