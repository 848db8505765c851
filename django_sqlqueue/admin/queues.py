"""QueueAdmin: the queues' pauses, limits and fair shares (queues/control.py), and what each
queue's ready jobs are waiting for.

Limits are edited on a queue's page (a row per queue an operator configured; "Add" makes one
for any queue name). Pause and resume are actions behind their own permission
(``pause_queue``). Every worker follows a change within one poll interval.
"""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.utils.html import format_html

from ..queues import control


class QueueChangeList(ChangeList):
    """Attaches each listed queue's state (running, ready, waiting on), read once per page."""

    def get_results(self, request):
        super().get_results(request)
        states = {state.name: state for state in control.states(using=self.queryset.db)}
        for row in self.result_list:
            row.state = states.get(row.name) or control.QueueState(row.name)


class QueueForm(forms.ModelForm):
    def clean_key_weights(self):
        return self.cleaned_data.get("key_weights") or {}  # an empty box: no weights


class QueueAdmin(admin.ModelAdmin):
    form = QueueForm
    list_display = ("name", "paused_badge", "limits", "running", "ready", "waiting_on")
    search_fields = ("name",)
    readonly_fields = ("paused_at", "paused_by", "last_claim_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("name", "paused_at", "paused_by")}),
        ("Limits of the whole queue (empty: no limit)", {
            "fields": ("concurrency_limit", "rate_limit", "rate_period_seconds")}),
        ("Limits of each concurrency_key", {
            "fields": ("key_concurrency_limit", "key_rate_limit")}),
        ("Fair shares between concurrency keys", {
            "fields": ("fair", "key_weights"),
            "description": 'Claims rotate between the keys with ready jobs, each in proportion '
                           'to its weight: {"gold": 3, "": 2} ("" is the jobs without a key; '
                           'a key not named weighs 1).'}),
        ("Claims", {"fields": ("last_claim_at", "updated_at")}),
    )
    actions = ("pause_queues", "resume_queues")

    def get_changelist(self, request, **kwargs):
        return QueueChangeList

    @admin.display(description="state")
    def paused_badge(self, row):
        if not row.is_paused:
            return "active"
        by = f" by {row.paused_by}" if row.paused_by else ""
        return format_html('<strong style="color:#c77700">paused</strong>{}', by)

    @admin.display(description="limits")
    def limits(self, row):
        return row.describe_limits()

    @admin.display(description="running")
    def running(self, row):
        return row.state.running

    @admin.display(description="ready")
    def ready(self, row):
        return row.state.ready

    @admin.display(description="waiting on")
    def waiting_on(self, row):
        parts = [*row.state.waiting_on, *(f"key {key}: {reason}" for key, reason in
                                          sorted(row.state.keys_at_limit.items())[:10])]
        return "; ".join(parts) or "-"

    def has_pause_permission(self, request):
        return request.user.has_perm("django_sqlqueue.pause_queue")

    @admin.action(description="Pause the selected queues", permissions=["pause"])
    def pause_queues(self, request, queryset):
        by = request.user.get_username()
        for row in queryset:
            control.pause(row.name, by=by, using=queryset.db)
        self.message_user(request, f"Paused {queryset.count()} queue(s); workers stop claiming "
                          "from them within one poll interval.", messages.SUCCESS)

    @admin.action(description="Resume the selected queues", permissions=["pause"])
    def resume_queues(self, request, queryset):
        for row in queryset:
            control.resume(row.name, using=queryset.db)
        self.message_user(request, f"Resumed {queryset.count()} queue(s).", messages.SUCCESS)
