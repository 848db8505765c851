"""Periodic schedules, declared in code next to their task.

::

    from django_sqlqueue import job, schedule

    @schedule(cron="0 3 * * *", timezone="Europe/Berlin")
    @schedule(every=300, name="cleanup-often", kwargs={"quick": True})
    @job
    def cleanup(quick=False): ...

``@schedule`` goes above ``@job`` (or above Django's ``@task`` for a task of
``SQLQueueBackend``) and returns the task unchanged. A declaration is checked at once, so a bad
cron expression or time zone fails at import; it is only recorded here. Workers copy the
declarations into the Schedule table when they start (operations.sync), and from then on the
table is what ticks.
"""

import datetime as dt
import re
from dataclasses import dataclass, field

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from ..conf import QueueSettings, get_settings
from ..enqueue import building, validation
from ..enqueue.registered import RegisteredTask as JobTask
from ..exceptions import InvalidJob, InvalidPeriodicSchedule
from ..ticks import tick_plan, timetables

#: Schedule names: they appear in unique keys (``schedule:<name>@<tick>``) and in URLs.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,149}")
#: The job fields a schedule row keeps in ``job_options`` (with ``max_age_seconds``).
JOB_OPTION_FIELDS = (
    "queue", "priority", "max_attempts", "max_interruptions", "retry_backoff_seconds",
    "retry_min_delay_seconds",
    "retry_max_delay_seconds", "retry_jitter", "timeout_seconds",
)
DEFAULT_GRACE_SECONDS = 60.0
DEFAULT_CATCH_UP = 10

_declared: dict = {}


@dataclass(frozen=True, eq=False)
class ScheduleSpec:
    """One declared schedule: a task, when it runs, with what, and what to do with missed
    ticks. Made by ``@schedule``; ``definition()`` gives the Schedule row's columns."""

    name: str
    task: object  # a @job Task, or a django.tasks Task of SQLQueueBackend
    cron: str | None = None
    every: int | None = None
    timezone: str | None = None  # None: settings.TIME_ZONE, read at the sync
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    queue: str | None = None  # None: the task's
    priority: int | None = None
    missed: str = tick_plan.LATEST
    catch_up: int = 1
    grace_seconds: float = DEFAULT_GRACE_SECONDS

    @property
    def task_label(self) -> str:
        return task_label(self.task)

    def key(self) -> tuple:
        """What makes two declarations the same schedule (a module imported twice)."""
        return (self.task_label, self.cron, self.every, self.timezone, repr(self.args),
                repr(self.kwargs), self.queue, self.priority, self.missed, self.catch_up,
                self.grace_seconds)

    def zone_name(self) -> str:
        if self.cron is None:
            return "UTC"
        return self.timezone or getattr(django_settings, "TIME_ZONE", None) or "UTC"

    def timetable(self):
        return timetables.timetable(cron=self.cron, every=self.every, timezone=self.zone_name())

    def definition(self) -> dict:
        """The Schedule columns that follow the code: the timing, the task's job fields and
        payload resolved now (with the current settings), and the missed-tick policy."""
        self.timetable()  # TIME_ZONE may have changed since the declaration
        task_name, payload, options = job_template(self)
        return {
            "task_name": task_name,
            "cron": self.cron or "",
            "every_seconds": self.every,
            "timezone": self.zone_name(),
            "payload": payload,
            "job_options": options,
            "missed": self.missed,
            "catch_up": self.catch_up,
            "grace_seconds": self.grace_seconds,
        }


def schedule(*, cron: str | None = None, every=None, timezone: str | None = None,
             name: str | None = None, args=(), kwargs=None, queue: str | None = None,
             priority: int | None = None, missed: str = tick_plan.LATEST,
             catch_up: int | None = None, grace=DEFAULT_GRACE_SECONDS):
    """Declare a periodic schedule of the task below: ``@schedule(cron=...)`` or
    ``@schedule(every=...)`` above ``@job`` (or above Django's ``@task``).

    - ``cron``: five fields or an alias (``@hourly``, ``@daily``, ``@weekly``, ``@monthly``,
      ``@yearly``), in ``timezone`` (an IANA name; default ``settings.TIME_ZONE``).
    - ``every``: seconds (a whole number, at least 1) or a timedelta; ticks at the multiples
      of it since the Unix epoch, in real time.
    - ``name``: the schedule's identity in the table (default: the task's name; give one to
      every schedule of a task that has several). Keep it when changing the timing: the row,
      its history and its paused state go on.
    - ``args``, ``kwargs``: the job's arguments, the same at every tick (JSON).
    - ``queue``, ``priority``: instead of the task's.
    - ``missed``: what to do with ticks missed while no worker ran: ``"latest"`` (run the
      latest once, the default), ``"skip"``, or ``"catch_up"`` (run up to ``catch_up`` of
      them, default 10, at most 1000).
    - ``grace``: a tick found up to this late (seconds or timedelta, default 60) is late, not
      missed: it is enqueued whatever ``missed`` says.
    """
    checked = checked_options(cron=cron, every=every, timezone=timezone, name=name, args=args,
                              kwargs=kwargs, queue=queue, priority=priority, missed=missed,
                              catch_up=catch_up, grace=grace)
    conf = _settings()

    def declare(task):
        label = task_label(task)
        spec = ScheduleSpec(name=name or label, task=task, **checked)
        if not NAME_RE.fullmatch(spec.name):
            raise InvalidPeriodicSchedule(
                f"the task name {spec.name!r} cannot name a schedule: give it name=...")
        if isinstance(task, JobTask) or conf is _settings_if_valid():
            job_template(spec, conf)  # a bad queue, priority or backend fails at import
        register(spec)
        return task

    return declare


def checked_options(*, cron=None, every=None, timezone=None, name=None, args=(), kwargs=None,
                    queue=None, priority=None, missed=tick_plan.LATEST, catch_up=None,
                    grace=DEFAULT_GRACE_SECONDS) -> dict:
    """``schedule()``'s arguments checked (InvalidPeriodicSchedule, or the enqueue errors of a
    bad queue or priority) and normalised: the ``ScheduleSpec`` fields other than ``name`` and
    ``task``. The one check of every schedule, declared in code or made at run time."""
    table = timetables.timetable(cron=cron, every=every, timezone=timezone or "UTC")
    every_seconds = table.seconds if table.kind == "interval" else None
    if every is not None and timezone is not None:
        raise InvalidPeriodicSchedule(
            "timezone= goes with cron=: an interval counts real seconds, which no time zone "
            "changes.")
    if missed not in tick_plan.POLICIES:
        raise InvalidPeriodicSchedule(
            f"missed={missed!r}: use 'latest' (the default), 'skip' or 'catch_up'.")
    if missed == tick_plan.CATCH_UP:
        catch_up = DEFAULT_CATCH_UP if catch_up is None else catch_up
        if (isinstance(catch_up, bool) or not isinstance(catch_up, int)
                or not 1 <= catch_up <= tick_plan.MAX_CATCH_UP):
            raise InvalidPeriodicSchedule(
                f"catch_up={catch_up!r}: the most missed ticks to run, from 1 to "
                f"{tick_plan.MAX_CATCH_UP}.")
    elif catch_up is not None:
        raise InvalidPeriodicSchedule("catch_up= goes with missed='catch_up'.")
    else:
        catch_up = 1
    grace_seconds = validation.seconds(grace, "grace", error=InvalidPeriodicSchedule)
    if grace_seconds > tick_plan.MAX_GRACE_SECONDS:
        raise InvalidPeriodicSchedule(
            f"grace={grace!r}: at most {tick_plan.MAX_GRACE_SECONDS:g} seconds (a day).")
    if name is not None and (not isinstance(name, str) or not NAME_RE.fullmatch(name)):
        raise InvalidPeriodicSchedule(
            f"name={name!r}: 1 to 150 characters from letters, digits, '_', '.', ':', '/' and "
            "'-', starting with a letter or digit.")
    try:
        payload = validation.json_payload(args, kwargs, max_bytes=_settings().MAX_PAYLOAD_BYTES)
    except InvalidJob as exc:
        raise InvalidPeriodicSchedule(f"schedule arguments: {exc}") from None
    if queue is not None:
        validation.queue_name(queue)
    if priority is not None:
        validation.priority(priority)
    return {"cron": table.expression if cron is not None else None, "every": every_seconds,
            "timezone": timezone, "args": tuple(payload["args"]), "kwargs": payload["kwargs"],
            "queue": queue, "priority": priority, "missed": missed, "catch_up": catch_up,
            "grace_seconds": grace_seconds}


def register(spec: ScheduleSpec) -> None:
    """Record a declaration; a second, different schedule of the same name is refused."""
    existing = _declared.get(spec.name)
    if existing is not None and existing.key() != spec.key():
        raise ImproperlyConfigured(
            f"two different schedules are named {spec.name!r} (of {existing.task_label} and of "
            f"{spec.task_label}): give each schedule of a task its own name=..."
        )
    _declared[spec.name] = spec


def declared() -> list:
    """Every schedule declared in this process, by name."""
    return [_declared[name] for name in sorted(_declared)]


def task_label(task) -> str:
    if isinstance(task, JobTask):
        return task.name
    module_path = getattr(task, "module_path", None)
    if isinstance(module_path, str) and hasattr(task, "get_backend"):
        return module_path  # a django.tasks Task
    raise TypeError(
        f"@schedule({task!r}): put @schedule above @job (or above Django's @task), so that it "
        "decorates the task: @schedule(...) then @job then def."
    )


def _settings() -> QueueSettings:
    """The settings, or the defaults when they are invalid: a declaration must not fail at
    import because of them, so that ``manage.py check`` can report sqlqueue.E001."""
    try:
        return get_settings()
    except ImproperlyConfigured:
        return QueueSettings()


def _settings_if_valid() -> QueueSettings | None:
    try:
        return get_settings()
    except ImproperlyConfigured:
        return None


def job_template(spec: ScheduleSpec, conf: QueueSettings | None = None) -> tuple:
    """``(task_name, payload, job_options)`` of the jobs the schedule enqueues."""
    payload = {"args": list(spec.args), "kwargs": dict(spec.kwargs)}
    overrides = {key: value for key, value in (("queue", spec.queue),
                                                ("priority", spec.priority)) if value is not None}
    if isinstance(spec.task, JobTask):
        defaults = building.job_defaults(spec.task.name, {**spec.task.options, **overrides},
                                         conf)
        fields, max_age = defaults.fields, defaults.max_age
        task_name = spec.task.name
    else:
        backend = spec.task.get_backend()
        template = getattr(backend, "scheduled_job_fields", None)
        if template is None:
            raise ImproperlyConfigured(
                f"schedule {spec.name!r}: task {spec.task_label} belongs to backend "
                f"{spec.task.backend!r}, which is not django-sqlqueue's SQLQueueBackend; only "
                "its tasks can be scheduled here."
            )
        fields = template(spec.task, payload["args"], payload["kwargs"], **overrides)
        payload, max_age, task_name = fields["payload"], None, fields["task_name"]
    options = {key: fields[key] for key in JOB_OPTION_FIELDS}
    options["max_age_seconds"] = max_age
    if fields.get("transactional"):  # named only when set, as tags below
        options["transactional"] = True
    if isinstance(spec.task, JobTask):
        # The task's tags and metadata go with each tick's job; named only when set, so that
        # the rows of schedules without them stay as they were.
        options.update({key: value for key, value in (("tags", defaults.tags),
                                                      ("metadata", defaults.metadata)) if value})
    return task_name, payload, options


def tick_key(name: str, tick: dt.datetime) -> str:
    """The unique key of the job of one tick: ``schedule:<name>@2026-01-31T03:00:00Z``."""
    instant = tick.astimezone(dt.timezone.utc)
    text = instant.strftime("%Y-%m-%dT%H:%M:%S")
    if instant.microsecond:
        text += f".{instant.microsecond:06d}"
    return f"schedule:{name}@{text}Z"
