"""The admin for jobs and workers, registered on Django's default admin site.

- Jobs (jobs.py): the list with filters and search, the read-only job page, and the actions
  retry now, run now, cancel and delete, each with its own permission (actions.py).
- Workers (workers.py): live workers, their heartbeats and what each is running.
- The queue dashboard (dashboard.py, chart.py): per queue counts, lag and throughput, at
  ``<admin>/django_sqlqueue/job/dashboard/``, linked from the app's admin page and the lists.

To use another admin site, register the same classes on it:
``my_site.register(Job, JobAdmin)`` and ``my_site.register(Worker, WorkerAdmin)``.
"""

from django.contrib import admin

from ..models import Job, Worker
from .jobs import JobAdmin
from .workers import WorkerAdmin

__all__ = ["JobAdmin", "WorkerAdmin"]

admin.site.register(Job, JobAdmin)
admin.site.register(Worker, WorkerAdmin)
