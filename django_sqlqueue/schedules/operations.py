"""What is done to Schedule rows: the sync from code, enqueuing due ticks, and the operator's
pause, resume and run now. The worker's scheduler step, the admin and ``manage.py schedules``
call these; none of them writes a schedule row another way.

Exactly one job per tick: ``enqueue_ticks`` first moves the schedule's cursor with one UPDATE
fenced on the cursor and version it read (``advance_schedule``), and inserts the tick's job
in the same transaction only if that UPDATE changed the row. Any number of processes may try
the same tick; the database lets one through. The job also carries the unique key
``schedule:<name>@<tick>``, so that even a cursor set back by hand cannot give a tick a second
unfinished job.
"""

import datetime as dt
import logging
from dataclasses import dataclass

from django.db import connections, transaction
from django.db.models import F

from ..db import ops, returning
from ..db.clock import database_now
from ..enqueue.building import build_job, new_job_state
from ..enqueue.inserting import insert_job
from ..models import Job, Schedule
from ..ticks import tick_plan
from .declare import declared, tick_key

# The logger keeps the name it had before the module moved (docs/operations.md lists it).
logger = logging.getLogger("django_sqlqueue.scheduling")
UTC = dt.timezone.utc
#: Columns a sync writes from the code (and nothing else writes).
DEFINITION_FIELDS = (
    "task_name", "cron", "every_seconds", "timezone", "payload", "job_options", "missed",
    "catch_up", "grace_seconds",
)
TIMING_FIELDS = ("cron", "every_seconds", "timezone")


# ---- the sync from code -------------------------------------------------------------------------
@dataclass(frozen=True)
class SyncResult:
    created: tuple = ()
    updated: tuple = ()  # definition changed (or retired and declared again: revived)
    retired: tuple = ()
    unchanged: int = 0
    # Declared in code under the name of a run-time schedule: left alone, logged as an error.
    conflicts: tuple = ()

    def summary(self) -> str:
        parts = [f"{len(names)} {what}" for what, names in (
            ("created", self.created), ("updated", self.updated), ("retired", self.retired),
            ("in conflict with run-time schedules", self.conflicts))
            if names]
        return ", ".join(parts + [f"{self.unchanged} unchanged"])


def sync(alias: str, specs=None, *, now: dt.datetime | None = None) -> SyncResult:
    """Make the table follow the declared schedules (default: every ``@schedule`` of this
    process): create the new ones, update those whose definition changed, revive retired ones
    declared again, and retire those gone from the code. Paused schedules stay paused.
    Run-time schedules (``source="runtime"``, schedules/runtime.py) are never changed nor
    retired: a declaration with the name of one is left out and logged as an error.

    A changed timing, a new and a revived schedule start at their first tick after now: ticks
    of an old definition, or from before the schedule existed, are not owed. Each write is one
    statement fenced on what was read (a concurrent sync or scheduler wins, and this one reads
    again), so workers starting together may all sync at once.
    """
    specs = declared() if specs is None else list(specs)
    definitions = {spec.name: (spec, spec.definition()) for spec in specs}
    created, updated, conflicts = [], [], []
    unchanged = 0
    for name in sorted(definitions):
        spec, definition = definitions[name]
        for _ in range(5):  # another process changed the row between our read and write
            outcome = _sync_one(alias, name, spec, definition, now)
            if outcome is not None:
                break
        else:
            raise RuntimeError(f"schedule {name!r}: the row kept changing during the sync")
        if outcome == "created":
            created.append(name)
        elif outcome == "updated":
            updated.append(name)
        elif outcome == "conflict":
            conflicts.append(name)
        else:
            unchanged += 1
    retired = _retire_undeclared(alias, set(definitions), now)
    result = SyncResult(tuple(created), tuple(updated), tuple(retired), unchanged,
                        tuple(conflicts))
    if created or updated or retired or conflicts:
        logger.info("schedules synced %s", result.summary())
    return result


def _sync_one(alias, name, spec, definition, now):
    """"created", "updated", "unchanged" or "conflict" (a run-time schedule has the name); None
    when a concurrent change lost us the write."""
    row = Schedule.objects.using(alias).filter(name=name).first()
    clock = now or database_now(alias)
    if row is None:
        first = first_tick_after(spec.timetable(), clock)
        inserted = Schedule.objects.using(alias).bulk_create(
            [Schedule(name=name, **definition, next_run_at=first, created_at=clock,
                      synced_at=clock)],
            ignore_conflicts=True,
        )
        # With ignore_conflicts the pk is never set: read back whether ours went in.
        return "created" if inserted and Schedule.objects.using(alias).filter(
            name=name, created_at=clock, version=1, source=Schedule.CODE).exists() else None
    if row.source != Schedule.CODE:
        logger.error("schedule name=%s is declared in code and was created at run time: the "
                     "run-time schedule is kept and the declaration ignored; rename one of them",
                     name)
        return "conflict"
    changes = {key: value for key, value in definition.items() if getattr(row, key) != value}
    revive = row.retired_at is not None
    if not changes and not revive:
        return "unchanged"
    values = {**definition, "synced_at": clock, "version": F("version") + 1,
              "retired_at": None}
    fence = {"pk": row.pk, "version": row.version, "retired_at": row.retired_at,
             "source": Schedule.CODE}
    if revive or any(key in changes for key in TIMING_FIELDS):
        # A new cursor: only over the one read (a tick handled meanwhile moved it: read again).
        values["next_run_at"] = first_tick_after(spec.timetable(), clock)
        fence["next_run_at"] = row.next_run_at
    written = Schedule.objects.using(alias).filter(**fence).update(**values)
    if not written:
        return None
    logger.info("schedule name=%s %s (%s)", name, "revived" if revive else "updated",
                ", ".join(sorted(changes)) or "declared again")
    return "updated"


def _retire_undeclared(alias, names: set, now) -> list:
    code = Schedule.objects.using(alias).current().filter(source=Schedule.CODE)
    retiring = list(code.exclude(name__in=names).values_list("name", flat=True))
    if not retiring:
        return []
    clock = now or database_now(alias)
    code.filter(name__in=retiring).update(
        retired_at=clock, version=F("version") + 1)
    for name in retiring:
        logger.warning("schedule name=%s retired: no longer declared in the code", name)
    return retiring


def unsynced(alias: str, *, now: dt.datetime) -> list:
    """The schedules declared in this code that the table does not hold (or holds retired):
    added since the last worker started, so no sync wrote them yet. Unsaved rows, as the sync
    would create them: ``manage.py schedules`` lists them as "not synced"."""
    specs = {spec.name: spec for spec in declared()}
    held = set(Schedule.objects.using(alias).current().filter(name__in=list(specs))
               .values_list("name", flat=True))
    rows = []
    for name in sorted(set(specs) - held):
        spec = specs[name]
        rows.append(Schedule(name=name, **spec.definition(),
                             next_run_at=first_tick_after(spec.timetable(), now)))
    return rows


def first_tick_after(table, instant):
    return next(iter(table.ticks_after(instant)), None)


# ---- ticks -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fired:
    won: bool  # this process moved the cursor (False: another one did, or the row changed)
    jobs: tuple = ()  # the jobs enqueued for the plan's ticks


def plan_for(row: Schedule, now: dt.datetime) -> tick_plan.TickPlan:
    """What ``enqueue_ticks`` should do with the ticks of ``row`` due at ``now``."""
    return tick_plan.plan(row.timetable, row.next_run_at, now, missed=row.missed,
                          catch_up=row.catch_up, grace_seconds=row.grace_seconds)


def enqueue_ticks(row: Schedule, plan: tick_plan.TickPlan, *, holder: str, now: dt.datetime,
                  alias: str) -> Fired:
    """Carry out ``plan`` for ``row`` (as read): move the cursor, fenced, then enqueue the
    planned ticks' jobs and record the last one, all in one transaction. Nothing happens when
    another process moved the cursor first."""
    connection = connections[alias]
    skipped_at = plan.last_skipped
    with transaction.atomic(using=alias):
        moved = returning.fetch(connection, *ops(connection).advance_schedule(
            Schedule, schedule_id=row.pk, cursor=row.next_run_at, version=row.version,
            next_run_at=plan.next_run_at, skipped=plan.skipped, last_skipped_at=skipped_at))
        if not moved:
            return Fired(won=False)
        jobs = tuple(_enqueue(row, tick, holder=holder, now=now, alias=alias)
                     for tick in plan.enqueue)
        if jobs:
            _record_runs(row, jobs, holder, alias)
    return Fired(won=True, jobs=jobs)


def run_now(row: Schedule, *, by: str, now: dt.datetime | None = None, alias: str | None = None):
    """Enqueue one job of the schedule now, outside its ticks (the cursor does not move): the
    admin's and the command's "run now". Works on a paused schedule, not on a retired one."""
    alias = alias or row._state.db or "default"
    if row.retired_at is not None:
        raise ValueError(f"schedule {row.name!r} is retired: it is no longer in the code.")
    now = now or database_now(alias)
    with transaction.atomic(using=alias):
        job = _enqueue(row, now, holder=by, now=now, alias=alias, manual=True)
        _record_runs(row, (job,), by, alias)
    logger.info("schedule name=%s run now by=%s job=%s", row.name, by, job.pk)
    return job


def pause(queryset, *, by: str, now: dt.datetime | None = None) -> int:
    """Pause the active schedules of ``queryset``; returns how many. No tick is enqueued until
    they are resumed; syncs (deploys) leave them paused."""
    alias = queryset.db
    count = queryset.active().update(paused_at=now or database_now(alias), paused_by=by[:150],
                                     version=F("version") + 1)
    return count


def resume(queryset, *, now: dt.datetime | None = None) -> int:
    """Resume the paused schedules of ``queryset``; returns how many. Each starts again at its
    first tick after now: the ticks that fell while it was paused are not owed."""
    alias = queryset.db
    now = now or database_now(alias)
    resumed = 0
    for row in queryset.paused():
        resumed += Schedule.objects.using(alias).filter(
            pk=row.pk, version=row.version, paused_at__isnull=False).update(
            paused_at=None, paused_by="", next_run_at=first_tick_after(row.timetable, now),
            version=F("version") + 1)
    return resumed


def _enqueue(row: Schedule, tick, *, holder, now, alias, manual=False):
    options = dict(row.job_options or {})
    max_age = options.pop("max_age_seconds", None)
    fields = {key: value for key, value in options.items() if key in _JOB_FIELDS}
    entry = {"name": row.name, "tick": tick.astimezone(UTC).isoformat(), "by": holder}
    if manual:
        entry["manual"] = True
    fields.update(
        task_name=row.task_name,
        payload={**(row.payload or {}), "schedule": entry},
        run_at=tick,
        expires_at=None if max_age is None else tick + dt.timedelta(seconds=max_age),
        enqueued_at=now,
        unique_key=tick_key(row.name, tick),
        **new_job_state(),
    )
    job = insert_job(build_job(Job, fields), alias)
    logger.info("schedule name=%s tick=%s job=%s by=%s", row.name, entry["tick"], job.pk, holder)
    return job


def _record_runs(row, jobs, holder, alias):
    last = jobs[-1]
    Schedule.objects.using(alias).filter(pk=row.pk).update(
        last_run_at=last.run_at, last_job_id=last.pk, last_enqueued_by=holder[:255],
        runs=F("runs") + len(jobs))


_JOB_FIELDS = frozenset(field.name for field in Job._meta.concrete_fields)


# ---- reading -----------------------------------------------------------------------------------
def summaries(queryset, *, now: dt.datetime, next_count: int = 5, pending=()) -> list:
    """One dict per schedule of ``queryset``, plain JSON: what ``manage.py schedules`` prints.
    Times are ISO 8601 in the schedule's time zone (UTC for intervals). ``pending``: unsaved
    rows (``unsynced``), in the name order with the others, their state "not synced"."""
    rows = sorted([*queryset, *pending], key=lambda row: row.name)
    last_jobs = Job.objects.using(queryset.db).only("pk", "status").in_bulk(
        [row.last_job_id for row in rows if row.last_job_id])
    result = []
    for row in rows:
        try:
            zone = row.timetable.zone if row.cron else UTC
            next_runs = [tick.astimezone(zone).isoformat()
                         for tick in row.next_runs(next_count, now=now)]
            problem = None
        except ValueError as exc:  # a definition that no longer parses
            zone, next_runs, problem = UTC, [], str(exc)
        job = last_jobs.get(row.last_job_id)

        def local(value, zone=zone):
            return None if value is None else value.astimezone(zone).isoformat()

        result.append({
            "name": row.name, "source": row.source, "task": row.task_name,
            "state": row.state if row.pk is not None else "not synced",
            "description": row.describe(), "cron": row.cron or None,
            "every_seconds": row.every_seconds, "timezone": row.timezone if row.cron else None,
            "args": (row.payload or {}).get("args", []),
            "kwargs": (row.payload or {}).get("kwargs", {}),
            "next_runs": next_runs, "problem": problem,
            "last_run_at": local(row.last_run_at),
            "last_job": None if not row.last_job_id else {
                "id": row.last_job_id, "status": job.status if job else "pruned"},
            "last_enqueued_by": row.last_enqueued_by or None, "runs": row.runs,
            "missed": row.missed, "catch_up": row.catch_up, "grace_seconds": row.grace_seconds,
            "skipped_ticks": row.skipped_ticks, "last_skipped_at": local(row.last_skipped_at),
            "paused_at": local(row.paused_at), "paused_by": row.paused_by or None,
            "retired_at": local(row.retired_at),
        })
    return result
