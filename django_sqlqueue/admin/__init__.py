"""The admin for jobs and workers, registered on Django's default admin site.

- Jobs (jobs.py): the list with filters and search, the read-only job page, and the actions
  retry now, run now, cancel and delete, each with its own permission (actions.py).
- Workers (workers.py): live workers, their heartbeats and what each is running.
- Schedules (admin/schedules.py): the periodic schedules, their next runs and last outcome, and the
  actions pause, resume and run now, each with its own permission.
- Queues (queues.py): pauses and limits, and what each queue's ready jobs wait for, with the
  actions pause and resume (permission ``pause_queue``).
- The queue dashboard (dashboard.py, chart.py): per queue counts, lag and throughput, at
  ``<admin>/django_sqlqueue/job/dashboard/``, refreshing itself from ``dashboard/data/``; linked
  from the admin index (links.py), the app's admin page and the lists.

To use another admin site, register the same classes on it:
``my_site.register(Job, JobAdmin)``, ``my_site.register(Worker, WorkerAdmin)`` and
``my_site.register(Schedule, ScheduleAdmin)``, ``my_site.register(Queue, QueueAdmin)``, and
for the dashboard's row in the index ``my_site.register(QueueDashboard, QueueDashboardAdmin)``.
"""

from django.contrib import admin

from ..models import Job, Queue, QueueDashboard, Schedule, Worker
from .jobs import JobAdmin
from .links import QueueDashboardAdmin
from .queues import QueueAdmin
from .schedules import ScheduleAdmin
from .workers import WorkerAdmin

__all__ = ["JobAdmin", "QueueAdmin", "QueueDashboardAdmin", "ScheduleAdmin", "WorkerAdmin"]

admin.site.register(Job, JobAdmin)
admin.site.register(Worker, WorkerAdmin)
admin.site.register(Schedule, ScheduleAdmin)
admin.site.register(Queue, QueueAdmin)
admin.site.register(QueueDashboard, QueueDashboardAdmin)
