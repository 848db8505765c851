"""ScheduleAdmin: the periodic schedules, with pause, resume and run now.

Definitions declared in code (``@schedule``) are read-only here; those created at run time are
added, edited and deleted with the forms of schedule_form.py. The list shows each
schedule's timing in words, its time zone, its next five runs, its last run and that job's outcome;
the actions (and the buttons on a schedule's page) pause, resume or run it now, each behind a
permission of its own (``pause_schedule`` for pause and resume, ``run_schedule_now``), through the
functions of schedules/operations.py that the command line uses too. A declared schedule gone from
the code (retired) may be deleted from its page; the others would come back at the next sync."""

import logging
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from ..models import Job, Schedule
from ..schedules import operations
from .display import between, breakable, pretty_json, seconds_text, status_badge, when
from .page_actions import PageActionsMixin, when_field
from .schedule_form import RuntimeScheduleEditing

logger = logging.getLogger("django_sqlqueue.admin")
STATE_COLOURS = {"active": "#2e9d4a", "paused": "#c77700", "retired": "#7d8590"}
#: The states of a schedule each button on its page applies to.
PAGE_ACTION_STATES = {"run_now": ("active", "paused"), "pause": ("active",),
                      "resume": ("paused",)}


class StateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "Active"), ("paused", "Paused"), ("retired", "Retired")]

    def queryset(self, request, queryset):
        value = self.value()
        return getattr(queryset, value)() if value in ("active", "paused", "retired") else queryset


class ScheduleChangeList(ChangeList):
    """Attaches each listed schedule's last job, read with one query for the whole page."""

    def get_results(self, request):
        super().get_results(request)
        rows = list(self.result_list)
        ids = [row.last_job_id for row in rows if row.last_job_id]
        jobs = Job.objects.using(self.queryset.db).only("pk", "status").in_bulk(ids)
        for row in rows:
            row.last_job = jobs.get(row.last_job_id)


def plural(n, word="schedule") -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def who(request) -> str:
    return f"admin:{request.user.get_username()}"


class ScheduleAdmin(RuntimeScheduleEditing, PageActionsMixin, admin.ModelAdmin):
    list_display = ("name", "task", "when", "time_zone", "state_badge", "next_runs",
                    "last_run", "missed_policy", "owner")
    list_filter = (StateFilter, "source")
    search_fields = ("name", "task_name")
    search_help_text = "Text in the schedule's name or its task's name."
    ordering = ("name",)
    actions = ("pause", "resume", "run_now")
    page_actions = {"run_now": "Run now", "pause": "Pause", "resume": "Resume"}
    changelist_class = ScheduleChangeList
    fieldsets = (
        (None, {"fields": ("name", "owner", "task", "state_badge", "when", "time_zone", "arguments",
                           "job_options_json")}),
        ("Runs", {"fields": ("next_runs", "last_run", "last_enqueued_by", "runs", "jobs_link")}),
        ("Missed ticks", {"fields": ("missed_policy", "grace", "skipped")}),
        ("History", {"fields": ("created", "synced", "paused", "retired", "version")}),
    )
    readonly_fields = (
        "name", "owner", "task", "state_badge", "when", "time_zone", "arguments",
        "job_options_json", "next_runs", "last_run", "last_enqueued_by", "runs", "jobs_link",
        "missed_policy", "grace", "skipped", "created", "synced", "paused", "retired", "version",
    )

    # ---- permissions: add, change, delete of run-time schedules (schedule_form.py), plus
    # pause/resume and run now
    def has_pause_permission(self, request):
        return self._has(request, "pause_schedule")

    def has_run_now_permission(self, request):
        return self._has(request, "run_schedule_now")

    # ---- columns -------------------------------------------------------------------------
    @admin.display(description="task", ordering="task_name")
    def task(self, row):
        return breakable(row.task_name)

    @admin.display(description="owner", ordering="source")
    def owner(self, row):
        if row.source == Schedule.RUNTIME:
            return "created at run time"
        return format_html('<span title="{}">{}</span>',
                           "read-only here: change its @schedule in the code", "declared in code")

    @admin.display(description="when")
    def when(self, row):
        return row.describe()

    @admin.display(description="time zone", ordering="timezone")
    def time_zone(self, row):
        if row.every_seconds:
            return format_html('<span class="sq-muted" title="{}">{}</span>',
                               "an interval counts real seconds: no time zone", "-")
        return row.timezone

    @admin.display(description="state")
    def state_badge(self, row):
        state = row.state
        title = ""
        if state == "paused":
            title = f"paused by {row.paused_by or 'someone'} {row.paused_at:%Y-%m-%d %H:%M} UTC"
        return format_html('<span class="sq-badge" style="background:{}" title="{}">{}</span>',
                           STATE_COLOURS[state], title, state)

    @admin.display(description="next runs", ordering="next_run_at")
    def next_runs(self, row):
        if row.retired_at is not None:
            return "-"
        try:
            ticks = row.next_runs(5, now=timezone.now())
        except ValueError as exc:
            return format_html('<span class="sq-error">{}</span>', str(exc))
        zone = row.timetable.zone if row.cron else timezone.get_current_timezone()
        shape = "%d %b %H:%M:%S %Z" if any(t.second for t in ticks) else "%d %b %H:%M %Z"
        # The weekday apart: a narrow list leaves it out (includes/styles.html).
        items = format_html_join(
            "", '<li title="{}"><span class="sq-weekday">{} </span>{}</li>',
            ((tick.astimezone(zone).isoformat(), tick.astimezone(zone).strftime("%a"),
              tick.astimezone(zone).strftime(shape)) for tick in ticks))
        note = " (once resumed)" if row.paused_at else ""
        return format_html('<ul class="sq-running">{}</ul>{}', items, note)

    @admin.display(description="last run", ordering="last_run_at")
    def last_run(self, row):
        if not row.last_job_id:
            return "never"
        job = getattr(row, "last_job", None)
        if not hasattr(row, "last_job"):  # the schedule's own page
            job = Job.objects.using(row._state.db).only("pk", "status").filter(
                pk=row.last_job_id).first()
        outcome = status_badge(job.status) if job else format_html(
            '<span class="sq-muted">{}</span>', "job pruned")
        url = reverse("admin:django_sqlqueue_job_change", args=[row.last_job_id],
                      current_app=self.admin_site.name)
        return format_html('{} <a href="{}">#{}</a> {}', when(row.last_run_at), url,
                           row.last_job_id, outcome)

    @admin.display(description="missed ticks", ordering="missed")
    def missed_policy(self, row):
        text = {"latest": "run the latest once", "skip": "skip",
                "catch_up": f"catch up, at most {row.catch_up}"}.get(row.missed, row.missed)
        if row.skipped_ticks:
            return format_html('{} <span class="sq-muted">({} skipped so far)</span>', text,
                               row.skipped_ticks)
        return text

    @admin.display(description="arguments")
    def arguments(self, row):
        return pretty_json(row.payload)

    @admin.display(description="job options")
    def job_options_json(self, row):
        return pretty_json(row.job_options)

    @admin.display(description="jobs enqueued")
    def runs(self, row):
        return row.runs

    @admin.display(description="its jobs")
    def jobs_link(self, row):
        url = reverse("admin:django_sqlqueue_job_changelist", current_app=self.admin_site.name)
        query = urlencode({"q": f"schedule:{row.name}@"})
        return format_html('<a href="{}?{}">the jobs whose unique key names this schedule</a>',
                           url, query)

    @admin.display(description="grace")
    def grace(self, row):
        return f"{seconds_text(row.grace_seconds)}: a tick found later than this is missed"

    @admin.display(description="skipped ticks")
    def skipped(self, row):
        if not row.skipped_ticks:
            return "none"
        return format_html("{}, the latest {}", row.skipped_ticks, when(row.last_skipped_at))

    created = when_field("created_at", "created")
    synced = when_field("synced_at", "definition synced")

    @admin.display(description="paused")
    def paused(self, row):
        if row.paused_at is None:
            return "no"
        return format_html("by {}, {} ({} ago)", row.paused_by or "?", when(row.paused_at),
                           seconds_text(between(row.paused_at, timezone.now())))

    @admin.display(description="retired")
    def retired(self, row):
        return "no" if row.retired_at is None else when(row.retired_at)

    # ---- actions -------------------------------------------------------------------------
    @admin.action(permissions=["pause"], description="Pause (no ticks until resumed)")
    def pause(self, request, queryset):
        selected = queryset.count()
        changed = operations.pause(queryset, by=who(request))
        self._report(request, "pause", selected, changed, "paused",
                     "they were already paused, or retired")

    @admin.action(permissions=["pause"], description="Resume (from the next tick)")
    def resume(self, request, queryset):
        selected = queryset.count()
        changed = operations.resume(queryset)
        self._report(request, "resume", selected, changed, "resumed",
                     "they were not paused, or retired")

    @admin.action(permissions=["run_now"], description="Run now (one job each, now)")
    def run_now(self, request, queryset):
        enqueued = []
        for row in queryset.current():
            enqueued.append((row, operations.run_now(row, by=who(request))))
        for row, job in enqueued:
            url = reverse("admin:django_sqlqueue_job_change", args=[job.pk],
                          current_app=self.admin_site.name)
            self.message_user(request, format_html(
                'Schedule {} enqueued job <a href="{}">#{}</a>.', row.name, url, job.pk),
                messages.SUCCESS)
        skipped = queryset.count() - len(enqueued)
        logger.info("admin action=run_now user=%s selected=%s enqueued=%s",
                    request.user.get_username(), len(enqueued) + skipped, len(enqueued))
        if skipped:
            self.message_user(request, f"{plural(skipped)} skipped: retired schedules no "
                              "longer run.", messages.WARNING)

    def _report(self, request, action, selected, changed, done, why):
        logger.info("admin action=%s_schedule user=%s selected=%s changed=%s", action,
                    request.user.get_username(), selected, changed)
        if changed:
            self.message_user(request, f"{plural(changed)} {done}.", messages.SUCCESS)
        if selected > changed:
            self.message_user(request, f"{plural(selected - changed)} skipped: {why}.",
                              messages.WARNING)

    # ---- a schedule's page: its buttons --------------------------------------------------
    def page_action_applies(self, row, action):
        return row.state in PAGE_ACTION_STATES[action]
