"""WorkerAdmin: the workers page is the Worker changelist, read-only. Alive, late and presumed
dead are judged by observability/liveness.py.
"""

from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from ..models import Job
from ..observability.liveness import ALIVE, DEAD, LATE, heartbeat_state, serves  # noqa: F401 - used by others
from .display import between, seconds_text

STATE_COLOURS = {ALIVE: "#2e9d4a", LATE: "#c77700", DEAD: "#d1344b"}


class WorkerChangeList(ChangeList):
    """Attaches each listed worker's running jobs, read with one query for the whole page."""

    def get_results(self, request):
        super().get_results(request)
        workers = list(self.result_list)
        running = {}
        if workers:
            jobs = (
                Job.objects.running()
                .filter(claimed_by__in=[w.name for w in workers])
                .only("pk", "task_name", "claimed_by", "claimed_at")
                .order_by("claimed_at")
            )
            for job in jobs:
                running.setdefault(job.claimed_by, []).append(job)
        for worker in workers:
            worker.running_jobs = running.get(worker.name, [])


class WorkerAdmin(admin.ModelAdmin):
    list_display = (
        "name", "heartbeat", "running_now", "queues_served", "host", "pid", "up_for",
        "jobs_done", "version",
    )
    search_fields = ("name", "host")
    readonly_fields = (
        "name", "heartbeat", "host", "pid", "queues_served", "concurrency", "started_at",
        "up_for", "last_heartbeat_at", "jobs_done", "running_now", "version",
    )
    fields = readonly_fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # housekeeping removes dead workers, and rescues their jobs

    def get_changelist(self, request, **kwargs):
        return WorkerChangeList

    @admin.display(description="heartbeat", ordering="-last_heartbeat_at")
    def heartbeat(self, worker):
        state = heartbeat_state(worker)
        return format_html(
            '<span class="sq-badge" style="background:{}">{}</span> {} ago',
            STATE_COLOURS[state], state,
            seconds_text(between(worker.last_heartbeat_at, timezone.now())),
        )

    @admin.display(description="running now")
    def running_now(self, worker):
        jobs = getattr(worker, "running_jobs", None)
        if jobs is None:  # the worker's own page
            jobs = list(Job.objects.running().filter(claimed_by=worker.name).order_by("claimed_at"))
        summary = f"{len(jobs)} of {worker.concurrency}"
        if not jobs:
            return summary
        site, now = self.admin_site.name, timezone.now()
        items = format_html_join(
            "", '<li><a href="{}">#{}</a> {} <span class="sq-muted">({})</span></li>',
            (
                (reverse("admin:django_sqlqueue_job_change", args=[job.pk], current_app=site),
                 job.pk, job.task_name, seconds_text(between(job.claimed_at, now)))
                for job in jobs
            ),
        )
        query = urlencode({"status__exact": "running", "claimed_by": worker.name})
        url = reverse("admin:django_sqlqueue_job_changelist", current_app=site)
        return format_html('<a href="{}?{}">{}</a><ul class="sq-running">{}</ul>',
                           url, query, summary, items)

    @admin.display(description="queues", ordering="queues")
    def queues_served(self, worker):
        return ", ".join(worker.queues) if worker.queues else "all queues"

    @admin.display(description="up for", ordering="started_at")
    def up_for(self, worker):
        return seconds_text(between(worker.started_at, timezone.now()))
