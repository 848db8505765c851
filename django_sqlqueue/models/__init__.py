"""The tables, one module per domain: ``job.py`` (Job: statuses and transitions are described
in docs/concepts.md; its queryset in ``job_queryset.py``), ``workers.py`` (Worker and Leader:
who is alive and who leads a cluster-wide duty), ``queue.py`` (Queue: pauses and limits),
``schedule.py`` (Schedule, docs/schedules.md), ``throughput.py`` (the finished-jobs rollup),
``dependency.py`` (JobDependency: a workflow's edges, docs/workflows.md), ``step.py`` (JobStep:
durable steps' results, docs/steps.md) and ``scale_event.py`` (ScaleEvent: the last changes of
each ``runworker --autoscale`` supervisor).
Every model is importable from here, as ``django_sqlqueue.models`` always offered them."""

from ..conf import require_installed

# Before the model classes: Django would refuse the first with a RuntimeError that does not say
# what to add.
require_installed("django_sqlqueue.models (Job, the django.tasks backend) was imported")

from .dependency import JobDependency  # noqa: E402
from .job import Job, QueueDashboard  # noqa: E402
from .queue import Queue  # noqa: E402
from .scale_event import ScaleEvent  # noqa: E402
from .schedule import Schedule  # noqa: E402
from .step import JobStep  # noqa: E402
from .throughput import ThroughputCount, ThroughputCursor  # noqa: E402
from .workers import Leader, Worker  # noqa: E402

__all__ = ["Job", "JobDependency", "JobStep", "Leader", "Queue", "QueueDashboard", "ScaleEvent",
           "Schedule", "ThroughputCount", "ThroughputCursor", "Worker"]
