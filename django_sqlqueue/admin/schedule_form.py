"""The admin's forms for run-time schedules: add, edit and delete them, behind Django's own
``add_schedule``, ``change_schedule`` and ``delete_schedule`` permissions.

The form checks what it is given with the run-time API's own check (schedules/runtime.py, which
is ``@schedule``'s), and saving calls ``add_schedule``, ``update_schedule`` or
``remove_schedule``: the admin writes no schedule row another way. Schedules declared in code
stay read-only here, as the code owns them (a retired one may still be deleted)."""

from django import forms
from django.conf import settings as django_settings

from ..enqueue.registered import registered_names
from ..exceptions import InvalidJob, InvalidPeriodicSchedule
from ..models import Schedule
from ..schedules import runtime
from ..ticks import tick_plan

#: The form's fields, by section; ``name`` is read-only once the schedule exists (its jobs'
#: unique keys carry it).
FORM_FIELDSETS = (
    (None, {"fields": ("name", "owner", "task")}),
    ("When", {"fields": ("cron", "every_seconds", "timezone"),
              "description": "Give a cron expression or an interval in seconds, not both."}),
    ("Each job", {"fields": ("args", "kwargs", "queue", "priority")}),
    ("Missed ticks", {"fields": ("missed", "catch_up", "grace_seconds")}),
)
#: What a run-time schedule's page shows read-only below its form.
STATE_FIELDSETS = (
    ("Runs", {"fields": ("state_badge", "next_runs", "last_run", "last_enqueued_by", "runs",
                         "jobs_link", "skipped")}),
    ("History", {"fields": ("created", "synced", "paused", "version")}),
)
STATE_FIELDS = tuple(name for _, section in STATE_FIELDSETS for name in section["fields"])


class RuntimeScheduleForm(forms.ModelForm):
    task = forms.ChoiceField(help_text="A task registered with @job in this code.")
    args = forms.JSONField(required=False, initial=list,
                           help_text='The job\'s arguments, a JSON list: [1, "two"].')
    kwargs = forms.JSONField(required=False, initial=dict,
                             help_text='Its keyword arguments, a JSON object: {"to": "ops"}.')
    queue = forms.CharField(required=False, help_text="Empty: the task's queue.")
    priority = forms.IntegerField(required=False, help_text="Empty: the task's priority.")

    class Meta:
        model = Schedule
        fields = ("name", "cron", "every_seconds", "timezone", "missed", "catch_up",
                  "grace_seconds")
        help_texts = {
            "cron": 'Five fields ("0 3 * * *") or @hourly, @daily, @weekly, @monthly, @yearly.',
            "every_seconds": "Or: every this many seconds, at the multiples of it since 1970.",
            "timezone": "An IANA name (Europe/Paris); with cron only.",
            "catch_up": "With 'catch up': the most missed ticks to run (empty: 10).",
            "grace_seconds": "A tick found up to this late is late, not missed.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        row = self.instance
        names = registered_names()
        if not row._state.adding and row.task_name not in names:
            names = [row.task_name, *names]  # shown as it is; the check says what is wrong
        self.fields["task"].choices = [(name, name) for name in names]
        for optional in ("timezone", "catch_up"):
            if optional in self.fields:  # not on a view-only page
                self.fields[optional].required = False
        if row._state.adding:
            self.initial["timezone"] = getattr(django_settings, "TIME_ZONE", None) or "UTC"
            self.initial["catch_up"] = None
        else:
            payload, options = row.payload or {}, row.job_options or {}
            self.initial.update(task=row.task_name, args=payload.get("args", []),
                                kwargs=payload.get("kwargs", {}), queue=options.get("queue"),
                                priority=options.get("priority"))

    def clean(self):
        data = super().clean()
        if self._errors:
            return data
        cron = data.get("cron") or None
        missed = data.get("missed") or tick_plan.LATEST
        self.options = {
            "task": data["task"], "cron": cron, "every": data.get("every_seconds"),
            "timezone": (data.get("timezone") or None) if cron else None,
            "args": data.get("args") or [], "kwargs": data.get("kwargs") or {},
            "queue": data.get("queue") or None, "priority": data.get("priority"),
            "missed": missed,
            "catch_up": data.get("catch_up") if missed == tick_plan.CATCH_UP else None,
            "grace": data.get("grace_seconds"),
        }
        adding = self.instance._state.adding
        name = data.get("name") if adding else self.instance.name
        try:
            runtime.check(name, adding=adding, using=self.instance._state.db, **self.options)
        except (InvalidPeriodicSchedule, InvalidJob) as exc:
            raise forms.ValidationError(str(exc)) from None
        return data


class RuntimeScheduleEditing:
    """The ScheduleAdmin's add, edit and delete of run-time schedules (a mixin: the rest of
    the page is in schedules.py)."""

    @staticmethod
    def editable(obj) -> bool:
        """A new schedule, or one created at run time: the ones the forms change."""
        return obj is None or obj.source == Schedule.RUNTIME

    def has_change_permission(self, request, obj=None):
        if not self.editable(obj):
            return False  # declared in code: only the code changes it
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        """A run-time schedule, or a retired declared one, from its own page: any other would
        come back at the next sync."""
        return obj is not None and (obj.source == Schedule.RUNTIME or obj.retired_at is not None
                                    ) and super().has_delete_permission(request, obj)

    def get_form(self, request, obj=None, change=False, **kwargs):
        if self.editable(obj):
            kwargs["form"] = RuntimeScheduleForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return tuple((title, {**section, "fields": tuple(
                field for field in section["fields"] if field != "owner")})
                for title, section in FORM_FIELDSETS)
        if obj.source == Schedule.RUNTIME:
            return FORM_FIELDSETS + STATE_FIELDSETS
        return super().get_fieldsets(request, obj)

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        if obj.source == Schedule.RUNTIME:
            return ("name", "owner", *STATE_FIELDS)
        return super().get_readonly_fields(request, obj)

    def save_model(self, request, obj, form, change):
        if change:
            row = runtime.update_schedule(obj.name, using=obj._state.db, **form.options)
        else:
            options = dict(form.options)
            row = runtime.add_schedule(form.cleaned_data["name"], options.pop("task"),
                                       using=obj._state.db, **options)
        obj.pk, obj._state.adding, obj._state.db = row.pk, False, row._state.db

    def delete_model(self, request, obj):
        if obj.source == Schedule.RUNTIME:
            runtime.remove_schedule(obj.name, using=obj._state.db)
        else:
            super().delete_model(request, obj)
