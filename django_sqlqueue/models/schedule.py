"""Schedule: a periodic schedule's definition, its cursor and the operator's state; and
ScheduleQuerySet: which schedules are active, paused, retired, due."""

import datetime as dt

from django.db import models
from django.db.models import Q

from ..db import job_table
from ..db.clock import DatabaseNow
from ..statuses import CATCH_UP, LATEST, MISSED_POLICIES, SKIP
from ..ticks import timetables


class ScheduleQuerySet(models.QuerySet):
    def active(self):
        """Schedules that tick: neither paused nor retired."""
        return self.filter(paused_at__isnull=True, retired_at__isnull=True)

    def paused(self):
        return self.filter(paused_at__isnull=False, retired_at__isnull=True)

    def retired(self):
        """Schedules that are no longer in the code; they never tick."""
        return self.filter(retired_at__isnull=False)

    def current(self):
        """Schedules still in the code, active or paused."""
        return self.filter(retired_at__isnull=True)

    def due(self, now=None):
        """Active schedules with a tick not handled yet at ``now`` (default: the database's
        clock), earliest first."""
        now = now or DatabaseNow(in_filter=True)
        return self.active().filter(next_run_at__lte=now).order_by("next_run_at", "pk")


class Schedule(models.Model):
    """A periodic schedule: when to enqueue which task with which arguments (docs/schedules.md).

    A row has an owner, ``source``: ``"code"`` rows are written by the sync from code
    (``@schedule`` declarations, when a worker starts): the definition columns follow the code,
    and a schedule gone from the code is *retired* (``retired_at``), never deleted or left
    firing. ``"runtime"`` rows are made, changed and deleted at run time
    (schedules/runtime.py, the admin's forms); the sync never touches them. The operator's
    state (``paused_at``) is never touched by a sync, so a paused schedule stays paused across
    deploys.

    ``next_run_at`` is the cursor: the first tick not yet handled. The scheduler of any worker
    enqueues due ticks and moves the cursor in one transaction that first updates this row
    fenced on the cursor and ``version`` as it read them (schedules/operations.py), so each
    tick is decided once, by one process. A row is self-contained: the job options are resolved
    when it is synced, so any worker can enqueue its ticks without the task's code.
    """

    CODE, RUNTIME = "code", "runtime"
    SOURCE_CHOICES = [(CODE, "declared in code"), (RUNTIME, "created at run time")]
    MISSED_CHOICES = [
        (LATEST, "run the latest once"),
        (SKIP, "skip"),
        (CATCH_UP, "catch up"),
    ]

    name = models.CharField(max_length=150, unique=True)
    # Who owns the definition: the sync from code, or the run-time API and the admin.
    source = models.CharField(max_length=16, choices=SOURCE_CHOICES, default=CODE,
                              db_default=CODE)
    task_name = models.CharField(max_length=255)
    # Exactly one of cron (as written: "0 3 * * *" or "@daily") and every_seconds.
    cron = models.CharField(max_length=200, blank=True)
    every_seconds = models.PositiveIntegerField(null=True, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")  # an IANA name; cron only
    # {"args": [...], "kwargs": {...}}, plus "backend" for a django.tasks task.
    payload = models.JSONField(default=dict)
    # Job fields resolved from the task's options at the sync: queue, priority, max_attempts,
    # retry policy, timeout_seconds, and max_age_seconds (expires_at = tick + max_age).
    job_options = models.JSONField(default=dict)
    missed = models.CharField(max_length=16, choices=MISSED_CHOICES, default=LATEST)
    catch_up = models.PositiveIntegerField(default=1)  # most ticks enqueued after a backlog
    grace_seconds = models.FloatField(default=60.0)  # a tick found later than this is missed
    # Raised by every change of the definition; the scheduler's write is fenced on it.
    version = models.PositiveIntegerField(default=1)

    next_run_at = models.DateTimeField(null=True, blank=True)
    # The operator's state, kept across deploys.
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.CharField(max_length=150, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)  # gone from the code

    last_run_at = models.DateTimeField(null=True, blank=True)  # tick of the latest job
    last_job_id = models.BigIntegerField(null=True, blank=True)  # no FK: jobs are pruned
    last_enqueued_by = models.CharField(max_length=255, blank=True)  # a worker's name
    runs = models.PositiveBigIntegerField(default=0)  # jobs enqueued, "run now" included
    skipped_ticks = models.PositiveBigIntegerField(default=0)  # by the missed-tick policy
    last_skipped_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    synced_at = models.DateTimeField()  # the last sync that changed the definition

    objects = ScheduleQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        permissions = [
            ("pause_schedule", "Can pause and resume schedules"),
            ("run_schedule_now", "Can run a schedule now"),
        ]
        indexes = [
            # The scheduler's query, every second on every worker: active schedules by cursor.
            models.Index(
                fields=["next_run_at"],
                name="sqlqueue_schedule_due",
                condition=Q(paused_at__isnull=True, retired_at__isnull=True),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(missed__in=MISSED_POLICIES), name="sqlqueue_schedule_missed_valid"
            ),
            models.CheckConstraint(
                condition=Q(source__in=("code", "runtime")), name="sqlqueue_schedule_source_valid"
            ),
        ]

    def __str__(self):
        return self.name

    @classmethod
    def check(cls, **kwargs):
        # No models.W036/W037 on MariaDB: our migrations stand in (db/job_table.py).
        return job_table.without_handled_warnings(super().check(**kwargs))

    @property
    def state(self) -> str:
        """"retired", "paused" or "active"."""
        if self.retired_at is not None:
            return "retired"
        return "paused" if self.paused_at is not None else "active"

    @property
    def timetable(self):
        """When its ticks fall (timetables.py); raises InvalidPeriodicSchedule for a row whose
        definition no longer parses."""
        return timetables.of_row(self.cron, self.every_seconds, self.timezone)

    def describe(self) -> str:
        """``At 03:00 every day (0 3 * * *)`` or ``Every 2 seconds``."""
        try:
            return self.timetable.describe()
        except ValueError:
            return self.cron or f"every {self.every_seconds} s"

    def next_runs(self, count: int = 5, *, now: dt.datetime) -> list:
        """The next ``count`` ticks it will enqueue, from its cursor (a tick already due comes
        first), or after ``now`` for a paused schedule (resuming starts after now); none once
        retired."""
        if self.retired_at is not None:
            return []
        table = self.timetable
        if self.paused_at is not None or self.next_run_at is None:
            return timetables.next_ticks(table, now, count)
        return timetables.next_ticks(
            table, self.next_run_at - dt.timedelta(microseconds=1), count)

