"""JobAdmin: the job list, the read-only job page, and the operator actions.

Nothing here creates a job or edits one: there is no add form, every field is read-only, and the
only state changes are the actions (actions.py), which call the queryset API.
"""

from urllib.parse import urlencode

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from ..models import Worker
from ..statuses import JobStatus
from . import actions, dashboard, job_page, workflow_page
from .changelist import JobChangeList
from .display import (
    between,
    breakable,
    pretty_json,
    progress_bar,
    seconds_text,
    short_type,
    status_badge,
    when,
    when_short,
)
from .filters import (
    CancelFilter,
    DueFilter,
    HasErrorsFilter,
    QueueFilter,
    TagFilter,
    TaskFilter,
    WorkflowFilter,
)
from .page_actions import PageActionsMixin, when_field
from .paginator import EstimatedCountPaginator
from .step_detail import steps_detail
from .workflow_detail import workflow_detail


class JobAdmin(PageActionsMixin, admin.ModelAdmin):
    list_display = (
        "id", "status_badge", "task", "queue", "attempts_of_max", "run_at_when", "age",
        "duration", "worker", "last_error",
    )
    list_display_links = ("id", "task")
    list_filter = ("status", DueFilter, QueueFilter, TaskFilter, TagFilter, HasErrorsFilter,
                   CancelFilter, WorkflowFilter)
    search_fields = ("id", "task_name", "unique_key", "errors")  # see get_search_results
    search_help_text = ("A job id, tag:NAME for the jobs with that tag, or text in the task "
                        "name, unique key or errors.")
    date_hierarchy = "enqueued_at"
    ordering = ("-id",)
    list_per_page = 100
    paginator = EstimatedCountPaginator
    show_full_result_count = False  # that would be a COUNT(*) of the whole table
    show_facets = admin.ShowFacets.NEVER  # facet counts are a COUNT per filter choice
    actions = (actions.retry_now, actions.run_now, actions.cancel, actions.delete_selected)
    # Deleting has Django's own button on a job's page.
    page_actions = {"retry_now": "Retry now", "run_now": "Run now", "cancel": "Cancel job"}
    changelist_class = JobChangeList

    readonly_fields = (
        "last_error_detail",
        "status_badge", "progress_bar", "task_name", "queue", "priority", "transactional",
        "unique_key", "unique_slot", "tags_list", "worker_detail", "cancel_detail", "workflow",
        "attempts_of_max", "retry_policy", "errors_list", "steps_list", "payload_json",
        "metadata_json", "result_json",
        "enqueued", "due", "claimed", "finished", "duration", "waited", "expires",
        "timeout_seconds", "lease_expires", "claim_token",
    )

    # ---- permissions: read-only, plus one permission per action -----------------------
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_retry_permission(self, request):
        return self._has(request, "retry_job")

    def has_run_now_permission(self, request):
        return self._has(request, "run_job_now")

    def has_cancel_permission(self, request):
        return self._has(request, "cancel_job")

    # ---- the list ------------------------------------------------------------------------
    def get_search_results(self, request, queryset, search_term):
        """A number ("42" or "#42") finds the job with that id, through the primary key;
        ``tag:NAME`` the jobs with that tag (``JobQuerySet.tagged``). Other text is looked for
        as a whole (not word by word) in the task name, the unique key (or slot) and the
        errors: that reads every row the filters leave, so filter first on a big table."""
        term = search_term.strip()
        number = term.removeprefix("#")
        if number.isdigit() and int(number) < 2**63:
            return queryset.filter(pk=int(number)), False
        if term.startswith("tag:") and term[4:].strip():
            return queryset.tagged(term[4:].strip()), False
        if not term:
            return queryset, False
        match = (
            Q(task_name__icontains=term) | Q(unique_key__icontains=term)
            | Q(unique_slot__icontains=term) | Q(errors__icontains=term)
        )
        return queryset.filter(match), False

    @admin.display(description="status", ordering="status")
    def status_badge(self, job):
        if job.status == JobStatus.RUNNING and job.cancel_requested_at is not None:
            return format_html("{} <span class='sq-muted'>cancelling</span>",
                               status_badge(job.status))
        return status_badge(job.status)

    @admin.display(description="progress")
    def progress_bar(self, job):
        return progress_bar(job.progress)

    @admin.display(description="attempts", ordering="attempts")
    def attempts_of_max(self, job):
        # Interrupted runs are given back (max_attempts raised), so say how many there were.
        text = f"{job.attempts} of {job.max_attempts}"
        if job.interruptions:
            text += (f" ({job.interruptions} interrupted, of at most "
                     f"{job.max_interruptions})")
        return text

    @admin.display(description="task", ordering="task_name")
    def task(self, job):
        return breakable(job.task_name)

    @admin.display(description="run at", ordering="run_at")
    def run_at_when(self, job):
        return when_short(job.run_at)

    @admin.display(description="age", ordering="-enqueued_at")
    def age(self, job):
        return seconds_text(between(job.enqueued_at, timezone.now()), coarse=True)

    @admin.display(description="duration")
    def duration(self, job):
        """Of the latest attempt: finished minus claimed, or so far while it runs."""
        if job.claimed_at is None:
            return "-"
        if job.finished_at is not None and job.finished_at >= job.claimed_at:
            return seconds_text(between(job.claimed_at, job.finished_at))
        if job.status == JobStatus.RUNNING:
            return format_html("{} <span class='sq-muted'>so far</span>",
                               seconds_text(between(job.claimed_at, timezone.now())))
        return "-"

    @admin.display(description="worker", ordering="claimed_by")
    def worker(self, job):
        """host:pid of the worker (its random suffix in the tooltip), linked to it."""
        if not job.claimed_by:
            return "-"
        url = reverse("admin:django_sqlqueue_worker_changelist", current_app=self.admin_site.name)
        short = job.claimed_by.rsplit(":", 1)[0] if job.claimed_by.count(":") >= 2 else (
            job.claimed_by)
        return format_html('<a href="{}?{}" title="{}">{}</a>', url,
                           urlencode({"name": job.claimed_by}), job.claimed_by, short)

    @admin.display(description="last error")
    def last_error(self, job):
        message = getattr(job, "last_error_message", None)
        if not message:
            return ""
        kind = short_type(getattr(job, "last_error_type", "") or "")
        text = f"{kind}: {message}" if kind else message
        short = text if len(text) <= 72 else text[:71] + "…"
        return format_html('<span class="sq-error" title="{}">{}</span>', text, short)

    # ---- the job page --------------------------------------------------------------------
    def get_fieldsets(self, request, obj=None):
        return job_page.fieldsets(obj)

    @admin.display(description="")
    def last_error_detail(self, job):
        return job_page.last_error_detail(job)

    enqueued = when_field("enqueued_at", "enqueued")
    due = when_field("run_at", "run at")
    claimed = when_field("claimed_at", "claimed (latest attempt)")
    finished = when_field("finished_at", "finished")
    expires = when_field("expires_at", "expires")
    lease_expires = when_field("lease_expires_at", "lease expires")

    @admin.display(description="retry policy")
    def retry_policy(self, job):
        return (
            f"backoff {job.retry_backoff_seconds:g} s, doubling per attempt, between "
            f"{job.retry_min_delay_seconds:g} s and {job.retry_max_delay_seconds:g} s, "
            f"jitter {job.retry_jitter:.0%}"
        )

    @admin.display(description="waited")
    def waited(self, job):
        """From due (run_at) to the start of the latest attempt."""
        return seconds_text(between(job.run_at, job.claimed_at)) if job.claimed_at else "-"

    @admin.display(description="errors")
    def errors_list(self, job):
        return render_to_string(
            "admin/django_sqlqueue/job/errors.html",
            {"errors": [
                {
                    **entry,
                    "short_type": short_type(entry.get("type", "")),
                    "at_display": job_page.error_time(entry.get("at")),
                }
                for entry in reversed(job.errors or []) if isinstance(entry, dict)
            ]},
        )

    @admin.display(description="steps")
    def steps_list(self, job):
        return steps_detail(job)

    @admin.display(description="worker")
    def worker_detail(self, job):
        if not job.claimed_by:
            return "never claimed"
        worker = Worker.objects.filter(name=job.claimed_by).first()
        state = (
            format_html("registered now, last heartbeat {} ago",
                        seconds_text(between(worker.last_heartbeat_at, timezone.now())))
            if worker else "no longer registered (it stopped or was reaped)"
        )
        url = reverse("admin:django_sqlqueue_worker_changelist", current_app=self.admin_site.name)
        return format_html('<a href="{}?{}">{}</a> <span class="sq-muted">({})</span>', url,
                           urlencode({"name": job.claimed_by}), job.claimed_by, state)

    @admin.display(description="cancelled")
    def cancel_detail(self, job):
        """Who cancelled it and when; for a running job, whether its worker has stopped it."""
        who = job.cancelled_by or "someone"
        if job.cancel_requested_at is not None:
            asked = format_html("asked by {} at {} while it ran", who,
                                when(job.cancel_requested_at))
            if job.status == JobStatus.RUNNING:
                return format_html("{}; <strong>waiting for its worker to stop it</strong>", asked)
            if job.status == JobStatus.CANCELLED:
                return format_html("{}; stopped at {}", asked, when(job.finished_at))
            return asked
        if job.status == JobStatus.CANCELLED:
            return format_html("by {} at {}, before it started", who, when(job.finished_at))
        return "-"

    @admin.display(description="workflow")
    def workflow(self, job):
        return workflow_detail(job, self.admin_site.name)

    @admin.display(description="payload")
    def payload_json(self, job):
        return pretty_json(job.payload)

    @admin.display(description="metadata")
    def metadata_json(self, job):
        return pretty_json(job.metadata) if job.metadata is not None else "-"

    @admin.display(description="tags")
    def tags_list(self, job):
        return ", ".join(job.tags) if job.tags else "-"

    @admin.display(description="result")
    def result_json(self, job):
        return pretty_json(job.result) if job.result is not None else "-"

    def page_action_applies(self, job, action):
        return (job.status in actions.OPERATIONS[action].applies_to
                and not (action == "cancel" and job.cancel_requested_at is not None))  # asked

    # ---- extra pages ---------------------------------------------------------------------
    def get_urls(self):
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        wrap = self.admin_site.admin_view
        return [
            path("dashboard/", wrap(self.dashboard_view), name=f"{prefix}_dashboard"),
            path("dashboard/data/", wrap(self.dashboard_data_view),
                 name=f"{prefix}_dashboard_data"),
            path("workflow/<uuid:workflow_id>/", wrap(self.workflow_view),
                 name=f"{prefix}_workflow"),
            path("workflow/<uuid:workflow_id>/<str:action>/", wrap(self.workflow_action_view),
                 name=f"{prefix}_workflow_act"),
            *super().get_urls(),
        ]

    def dashboard_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        return dashboard.render(self, request)

    def dashboard_data_view(self, request):
        """What the dashboard polls to refresh itself: JSON, same permission as the page."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        return dashboard.data(self, request)

    def workflow_view(self, request, workflow_id):
        """A workflow's jobs in layers, with its actions (workflow_page.py)."""
        return workflow_page.render(self, request, workflow_id)

    def workflow_action_view(self, request, workflow_id, action):
        """Cancel a workflow or retry its failed jobs, once confirmed (workflow_page.py)."""
        return require_POST(self._workflow_action)(request, workflow_id, action)

    def _workflow_action(self, request, workflow_id, action):
        return workflow_page.act(self, request, workflow_id, action)

    def changelist_view(self, request, extra_context=None):
        """The list, with a link to the workflow's page when it is filtered by one."""
        return super().changelist_view(request, {
            **(extra_context or {}), "workflow_url": workflow_page.url_of_filter(self, request)})
