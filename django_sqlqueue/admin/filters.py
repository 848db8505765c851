"""List filters for jobs that stay cheap on a big table.

Django's field filters list every distinct value with ``SELECT DISTINCT``, a full scan of the job
table on every page view. The queue and task filters here offer the values of the newest
``RECENT_JOBS`` jobs instead (one query for both filters, read through the primary key), plus the
value selected now. An older queue is one click away from the dashboard, which lists every queue.
"""

from django.contrib import admin
from django.db.models import Q
from django.utils import timezone

RECENT_JOBS = 10_000


def recent_values(request, model) -> tuple[set, set, set]:
    """(queues, task names, tags) of the newest jobs, read once per request."""
    cached = getattr(request, "_sqlqueue_recent_values", None)
    if cached is None:
        # A backward scan of the primary key index, deduplicated here: "WHERE id IN (newest)"
        # would let PostgreSQL choose a hash join over the whole table.
        queues, tasks, tags = set(), set(), set()
        rows = model._default_manager.order_by("-pk").values_list("queue", "task_name", "tags")
        for queue, task, job_tags in rows[:RECENT_JOBS]:
            queues.add(queue)
            tasks.add(task)
            if job_tags:
                tags.update(tag for tag in job_tags if isinstance(tag, str))
        cached = request._sqlqueue_recent_values = (queues, tasks, tags)
    return cached


class _RecentValuesFilter(admin.SimpleListFilter):
    field_name = ""
    which = 0  # index into recent_values()

    def lookups(self, request, model_admin):
        values = set(recent_values(request, model_admin.model)[self.which])
        if self.value():
            values.add(self.value())
        return [(value, value) for value in sorted(values)]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(**{self.field_name: self.value()})
        return queryset


class QueueFilter(_RecentValuesFilter):
    title = "queue"
    parameter_name = "queue"
    field_name = "queue"
    which = 0


class TaskFilter(_RecentValuesFilter):
    title = "task"
    parameter_name = "task_name"
    field_name = "task_name"
    which = 1


class TagFilter(_RecentValuesFilter):
    """The tags of the newest jobs; the search box finds any tag: ``tag:billing``."""

    title = "tag"
    parameter_name = "tag"
    which = 2

    def queryset(self, request, queryset):
        return queryset.tagged(self.value()) if self.value() else queryset


class HasErrorsFilter(admin.SimpleListFilter):
    title = "has errors"
    parameter_name = "has_errors"

    def lookups(self, request, model_admin):
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request, queryset):
        no_errors = Q(errors=[])
        if self.value() == "yes":
            return queryset.exclude(no_errors)
        if self.value() == "no":
            return queryset.filter(no_errors)
        return queryset


class DueFilter(admin.SimpleListFilter):
    """Due now, or scheduled for later (run_at in the future): the dashboard's "queued, due"
    and "scheduled" link here, with the status filter."""

    title = "run at"
    parameter_name = "due"

    def lookups(self, request, model_admin):
        return [("now", "Due now"), ("later", "Scheduled for later")]

    def queryset(self, request, queryset):
        if self.value() == "now":
            return queryset.filter(run_at__lte=timezone.now())
        if self.value() == "later":
            return queryset.filter(run_at__gt=timezone.now())
class CancelFilter(admin.SimpleListFilter):
    """Cancelled jobs by when they were cancelled, and running jobs asked to stop."""

    title = "cancel"
    parameter_name = "cancel"

    def lookups(self, request, model_admin):
        return [("cancelling", "Asked to stop, still running"),
                ("while_running", "Cancelled while running"),
                ("before_start", "Cancelled before it started")]

    def queryset(self, request, queryset):
        if self.value() == "cancelling":
            return queryset.cancelling()
        if self.value() == "while_running":
            return queryset.cancelled_while_running()
        if self.value() == "before_start":
            return queryset.filter(status="cancelled", cancel_requested_at__isnull=True)
        return queryset
