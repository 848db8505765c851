"""Schedules made at run time: ``add_schedule``, ``update_schedule`` and ``remove_schedule``
(docs/schedules.md, "Schedules made at run time"); the admin's forms call them too.

::

    from django_sqlqueue.schedules.runtime import add_schedule, remove_schedule, update_schedule

    add_schedule("report-acme", "shop.tasks.send_report", cron="0 7 * * 1-5",
                 timezone="Europe/Paris", kwargs={"customer": 42})
    update_schedule("report-acme", cron="30 7 * * 1-5")
    remove_schedule("report-acme")

Their arguments are checked by the code that checks ``@schedule`` (declare.checked_options), and
the row they write is the one a sync writes, with ``source="runtime"``: the scheduler ticks it the
same way, one job per tick, with the same missed-tick policies. A sync from code never changes nor
retires such a row, and a run-time schedule never takes the name of one declared in code.

Every change is one statement fenced on what was read, like the sync's, and raises the row's
``version``: a scheduler that read the schedule before the change finds its cursor write fenced
out and enqueues nothing (its write and the change are serialised by the row's lock). A deleted
row has nothing to move, so once ``remove_schedule`` has committed, no tick of it is enqueued.
"""

import dataclasses
import datetime as dt
import logging

from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, router, transaction
from django.db.models import F

from ..db.clock import database_now
from ..enqueue.registered import resolve
from ..exceptions import (
    InvalidPeriodicSchedule,
    ScheduleDeclaredInCode,
    ScheduleExists,
    ScheduleNotFound,
    UnknownTask,
)
from ..models import Schedule
from ..ticks import tick_plan
from .declare import (
    DEFAULT_GRACE_SECONDS,
    NAME_RE,
    ScheduleSpec,
    checked_options,
    declared,
    job_template,
    task_label,
)
from .operations import TIMING_FIELDS, first_tick_after

logger = logging.getLogger("django_sqlqueue.scheduling")
UNSET = object()


def add_schedule(name: str, task, *, cron: str | None = None, every=None,
                 timezone: str | None = None, args=(), kwargs=None, queue: str | None = None,
                 priority: int | None = None, missed: str = tick_plan.LATEST,
                 catch_up: int | None = None, grace=DEFAULT_GRACE_SECONDS,
                 using: str | None = None, now: dt.datetime | None = None) -> Schedule:
    """Create a run-time schedule and return its row; its first tick is the first after now.

    ``task`` is a ``@job`` task, its registered name, or a ``django.tasks`` task of
    ``SQLQueueBackend``; the other arguments are ``@schedule``'s (``timezone`` defaults to
    ``settings.TIME_ZONE``, read now). Raises ``InvalidPeriodicSchedule`` (or the enqueue
    error of a bad queue or priority) for a bad definition, ``ScheduleDeclaredInCode`` for the
    name of a schedule declared in code, ``ScheduleExists`` for that of another run-time one.
    """
    alias = using or router.db_for_write(Schedule)
    spec = check(name, task, adding=True, using=alias, cron=cron, every=every,
                 timezone=timezone, args=args, kwargs=kwargs, queue=queue, priority=priority,
                 missed=missed, catch_up=catch_up, grace=grace)
    clock = now or database_now(alias)
    row = Schedule(name=spec.name, source=Schedule.RUNTIME, **spec.definition(),
                   next_run_at=first_tick_after(spec.timetable(), clock), created_at=clock,
                   synced_at=clock)
    try:
        with transaction.atomic(using=alias):
            row.save(using=alias, force_insert=True)
    except IntegrityError:
        _refuse_taken(alias, name)  # made meanwhile by another process: say whose it is
        raise
    logger.info("schedule name=%s created at run time (%s)", name, row.describe())
    return row


def update_schedule(name: str, *, task=UNSET, cron=UNSET, every=UNSET, timezone=UNSET,
                    args=UNSET, kwargs=UNSET, queue=UNSET, priority=UNSET, missed=UNSET,
                    catch_up=UNSET, grace=UNSET, using: str | None = None,
                    now: dt.datetime | None = None) -> Schedule:
    """Change a run-time schedule and return its row: the arguments given replace the row's,
    the others stay (``cron`` replaces ``every`` and the other way round; ``queue`` and
    ``priority`` left out keep the row's, or follow a new ``task``). Checked as
    ``add_schedule`` checks. A new timing starts at its first tick after now; its paused state,
    history and counts stay. Raises ``ScheduleNotFound`` or ``ScheduleDeclaredInCode``."""
    alias = using or router.db_for_write(Schedule)
    given = {key: value for key, value in (
        ("task", task), ("cron", cron), ("every", every), ("timezone", timezone),
        ("args", args), ("kwargs", kwargs), ("queue", queue), ("priority", priority),
        ("missed", missed), ("catch_up", catch_up), ("grace", grace)) if value is not UNSET}
    for _ in range(5):  # a scheduler or another change wrote the row between our read and write
        row = _owned_row(alias, name)
        spec = _spec(name, **{**_arguments_of(row, given), **given})
        definition = spec.definition()
        changes = sorted(key for key, value in definition.items() if getattr(row, key) != value)
        if not changes:
            return row
        clock = now or database_now(alias)
        values = {**definition, "synced_at": clock, "version": F("version") + 1}
        fence = {"pk": row.pk, "version": row.version, "source": Schedule.RUNTIME}
        if any(key in changes for key in TIMING_FIELDS):
            values["next_run_at"] = first_tick_after(spec.timetable(), clock)
            fence["next_run_at"] = row.next_run_at
        if Schedule.objects.using(alias).filter(**fence).update(**values):
            logger.info("schedule name=%s changed at run time (%s)", name, ", ".join(changes))
            return Schedule.objects.using(alias).get(pk=row.pk)
    raise RuntimeError(f"schedule {name!r}: the row kept changing during the update")


def remove_schedule(name: str, *, using: str | None = None) -> None:
    """Delete a run-time schedule. Once this has committed no tick of it is enqueued, not even
    by a scheduler that read it before; jobs already enqueued stay. Raises
    ``ScheduleNotFound`` or ``ScheduleDeclaredInCode`` (pause those, or remove the
    ``@schedule``)."""
    alias = using or router.db_for_write(Schedule)
    deleted, _ = Schedule.objects.using(alias).filter(
        name=name, source=Schedule.RUNTIME).delete()
    if not deleted:
        _owned_row(alias, name)  # raises: the row is gone, or declared in code
        raise ScheduleNotFound(f"no run-time schedule is named {name!r}.")
    logger.info("schedule name=%s removed at run time", name)


def check(name: str, task, *, adding: bool = False, using: str | None = None,
          **options) -> ScheduleSpec:
    """The schedule ``add_schedule`` (``adding``: the name must be free too) or
    ``update_schedule`` would write, checked, without writing it; the admin's form validates
    with it. ``options`` are ``add_schedule``'s."""
    spec = _spec(_checked_name(name), task, **options)
    if adding:
        if name in {declaration.name for declaration in declared()}:
            raise ScheduleDeclaredInCode(
                f"schedule {name!r} is declared in code (@schedule): choose another name.")
        _refuse_taken(using or router.db_for_write(Schedule), name)
    return spec


def _checked_name(name) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise InvalidPeriodicSchedule(
            f"name={name!r}: 1 to 150 characters from letters, digits, '_', '.', ':', '/' and "
            "'-', starting with a letter or digit.")
    return name


def _spec(name, task, **options) -> ScheduleSpec:
    if isinstance(task, str):
        try:
            task = resolve(task)
        except UnknownTask as exc:
            raise InvalidPeriodicSchedule(
                f"schedule {name!r}: {exc} (a django.tasks task is passed as the task itself, "
                "not by name)") from None
    try:
        task_label(task)
    except TypeError:
        raise InvalidPeriodicSchedule(
            f"schedule {name!r}: task={task!r} is not a task: pass a @job task, its registered "
            "name, or a django.tasks task of SQLQueueBackend.") from None
    if options.get("cron") is None and options.get("every") is None:
        raise InvalidPeriodicSchedule(f"schedule {name!r}: give cron=... or every=....")
    spec = ScheduleSpec(name=name, task=task, **checked_options(**options))
    try:
        job_template(spec)  # the job fields: a bad queue, priority or backend fails here
    except ImproperlyConfigured as exc:  # a django.tasks task of another backend
        raise InvalidPeriodicSchedule(str(exc)) from None
    return _pinned(spec)


def _pinned(spec: ScheduleSpec) -> ScheduleSpec:
    """A run-time schedule's time zone is read once, when it is written: a later change of
    ``settings.TIME_ZONE`` does not move its ticks (a declared one follows the setting)."""
    if spec.cron is None or spec.timezone is not None:
        return spec
    return dataclasses.replace(spec, timezone=spec.zone_name())


def _arguments_of(row: Schedule, given: dict) -> dict:
    """``update_schedule``'s arguments that reproduce ``row``, for those not ``given``."""
    payload = row.payload or {}
    timing = "cron" in given or "every" in given
    missed = given.get("missed", row.missed)
    kept = {
        "task": row.task_name,
        "cron": None if timing else (row.cron or None),
        "every": None if timing else row.every_seconds,
        "timezone": row.timezone if row.cron and "every" not in given else None,
        "args": payload.get("args", ()), "kwargs": payload.get("kwargs", {}),
        "missed": missed,
        "catch_up": row.catch_up if missed == row.missed == tick_plan.CATCH_UP else None,
        "grace": row.grace_seconds,
    }
    if "task" not in given:
        kept["queue"] = row.job_options.get("queue")
        kept["priority"] = row.job_options.get("priority")
    return {key: value for key, value in kept.items() if key not in given}


def _owned_row(alias: str, name: str) -> Schedule:
    """The run-time schedule ``name``, else ScheduleNotFound or ScheduleDeclaredInCode."""
    row = Schedule.objects.using(alias).filter(name=name).first()
    if row is None:
        raise ScheduleNotFound(f"no schedule is named {name!r}.")
    if row.source != Schedule.RUNTIME:
        raise ScheduleDeclaredInCode(
            f"schedule {name!r} is declared in code (@schedule): only the code changes it"
            + (" (it is retired: delete it in the admin first)" if row.retired_at else "")
            + "; a run-time schedule needs a name of its own.")
    return row


def _refuse_taken(alias: str, name: str) -> None:
    """ScheduleDeclaredInCode or ScheduleExists when a schedule is named ``name``."""
    try:
        _owned_row(alias, name)
    except ScheduleNotFound:
        return
    raise ScheduleExists(
        f"a run-time schedule is already named {name!r}: change it with update_schedule(), or "
        "choose another name.")
