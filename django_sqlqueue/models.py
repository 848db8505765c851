"""The tables: Job (statuses and transitions are described in docs/concepts.md), Worker, Leader
and Schedule (docs/schedules.md)."""

import datetime as dt
import functools

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from .conf import QueueSettings
from .db import job_table
from .queries import JobQuerySet
from .run import outcomes
from .schedules import tick_plan, timetables
from .schedules.queries import ScheduleQuerySet
from .statuses import FINISHED_STATUSES, JobStatus

_defaults = QueueSettings()


class Job(models.Model):
    """One unit of work: a registered task name and its JSON arguments.

    Every column a plain ``INSERT`` may leave out has a database default (``db_default``), so
    ``INSERT INTO django_sqlqueue_job (task_name, queue, payload) VALUES (...)`` makes a valid job
    from any language or from a trigger. Those database defaults are the built-in defaults of
    ``SQLQUEUE`` (conf.py); they do not follow your project's SQLQUEUE setting.
    """

    id = models.BigAutoField(primary_key=True)
    task_name = models.CharField(max_length=255)
    queue = models.CharField(max_length=100, db_default=_defaults.DEFAULT_QUEUE)
    # {"args": [...], "kwargs": {...}}; either key may be missing in rows inserted by SQL.
    payload = models.JSONField(db_default=models.Value("{}"))
    priority = models.SmallIntegerField(db_default=0)  # higher runs first, as in django.tasks
    status = models.CharField(
        max_length=16, choices=JobStatus.choices, db_default=JobStatus.QUEUED
    )

    # Attempts counts every start of the job, and never goes down; max_attempts bounds it.
    attempts = models.PositiveIntegerField(db_default=0)
    max_attempts = models.PositiveIntegerField(db_default=_defaults.MAX_ATTEMPTS)
    # Runs cut short by the infrastructure (its worker lost, its database gone): they go back to
    # ready without using an attempt; at max_interruptions the job ends exhausted instead, so
    # that a job that kills its workers is not run forever. A shutdown's release is recorded in
    # errors but not counted: it says nothing about the job.
    interruptions = models.PositiveIntegerField(db_default=0)
    max_interruptions = models.PositiveIntegerField(db_default=_defaults.MAX_INTERRUPTIONS)
    retry_backoff_seconds = models.FloatField(db_default=_defaults.BACKOFF_SECONDS)
    retry_min_delay_seconds = models.FloatField(db_default=_defaults.MIN_RETRY_DELAY_SECONDS)
    retry_max_delay_seconds = models.FloatField(db_default=_defaults.MAX_RETRY_DELAY_SECONDS)
    retry_jitter = models.FloatField(db_default=_defaults.RETRY_JITTER)

    enqueued_at = models.DateTimeField(db_default=Now())
    run_at = models.DateTimeField(db_default=Now())  # not started before this
    expires_at = models.DateTimeField(null=True, blank=True)  # never started after this
    timeout_seconds = models.FloatField(null=True, blank=True)  # None: SQLQUEUE["TIMEOUT_SECONDS"]
    claimed_at = models.DateTimeField(null=True, blank=True)  # start of the latest attempt
    finished_at = models.DateTimeField(null=True, blank=True)

    # Who holds the job: "host:pid:thread" of the worker, and the token of its claim. Outcome
    # writes match the token, so a worker whose lease was lost cannot overwrite a new owner's work.
    claimed_by = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # A cancel of a running job is a request: recorded here at once (when, and who asked), the
    # status stays running until the worker stops the attempt. Every outcome written while it is
    # set is written as cancelled (the drivers' ``record_outcomes``), so the job never runs again.
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001

    result = models.JSONField(null=True, blank=True)
    # One entry per failed or interrupted attempt: {"attempt", "at", "type", "message",
    # "traceback", "worker"}, and "interrupted": true for an interruption (outcomes.py).
    errors = models.JSONField(db_default=models.Value("[]"))
    # NULL, not "", means "no key": the partial unique index skips NULLs.
    unique_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # Jobs sharing a key count against the per-key limits of their queue (Queue). "" is no key,
    # not NULL: the claim reads the jobs without a key in claim order from the same index as a
    # key's (sqlqueue_job_ready_by_key); PostgreSQL keeps an index's order after "= ''", not
    # after "IS NULL" (it sorted every unkeyed ready row of the queue).
    concurrency_key = models.CharField(max_length=255, blank=True, db_default="")
    # The OpenTelemetry context of the enqueue ({"traceparent": ...}), which the run's span links
    # to (tracing.py); NULL without tracing, or in rows inserted by hand.
    trace_context = models.JSONField(null=True, blank=True, editable=False)

    objects = JobQuerySet.as_manager()

    class Meta:
        # Operator actions of the admin, each granted on its own; deleting uses "delete_job".
        permissions = [
            ("retry_job", "Can retry failed, exhausted, cancelled or expired jobs now"),
            ("run_job_now", "Can run scheduled or waiting jobs now"),
            ("cancel_job", "Can cancel jobs, running ones included"),
        ]
        # Each with the reason it exists: db/job_table.py.
        indexes = job_table.INDEXES
        constraints = job_table.CONSTRAINTS

    def __str__(self):
        return f"{self.task_name} #{self.pk} ({self.status})"

    @property
    def args(self) -> list:
        return (self.payload or {}).get("args", [])

    @property
    def kwargs(self) -> dict:
        return (self.payload or {}).get("kwargs", {})

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def schedule_name(self) -> str | None:
        """The name of the periodic schedule that enqueued this job, or None."""
        return _schedule_entry(self.payload).get("name")

    @property
    def schedule_tick(self) -> dt.datetime | None:
        """The tick (aware, UTC) this job was enqueued for by its schedule, or None. For "run
        now", the moment it was asked for."""
        tick = _schedule_entry(self.payload).get("tick")
        try:
            return dt.datetime.fromisoformat(tick) if isinstance(tick, str) else None
        except ValueError:
            return None

    # Outcomes of a claimed job. Each is fenced by the claim token and returns True if it was
    # applied, False if the job is no longer this claim's (lease lost, rescued, re-claimed).
    def complete(self, result=None, *, now=None) -> bool:
        return outcomes.complete(self, result, now=now)

    def fail(self, error, *, retry=True, delay=None, now=None) -> bool:
        return outcomes.fail(self, error, retry=retry, delay=delay, now=now)

    def reschedule(self, *, run_at=None, delay=None, now=None) -> bool:
        return outcomes.reschedule(self, run_at=run_at, delay=delay, now=now)

    def release(self, *, now=None) -> bool:
        return outcomes.release(self, now=now)

    def cancel(self, *, by=None, now=None) -> bool:
        """Cancel this job: at once if it has not started; if it is running, ask its worker to
        stop it (it ends ``cancelled``; see ``JobQuerySet.cancel``). ``by``: who asked (kept in
        ``cancelled_by``). False if it had finished, or its cancel was already asked for."""
        applied = Job.objects.using(self._state.db).filter(pk=self.pk).cancel(by=by, now=now) == 1
        if applied:
            self.refresh_from_db(fields=["status", "finished_at", "cancel_requested_at",
                                         "cancelled_by"])
        return applied

    @property
    def cancel_requested(self) -> bool:
        """Whether this attempt was asked to stop. A long job checks it between steps
        (``current_job().cancel_requested``) and returns or raises: it ends ``cancelled``."""
        return self.cancel_requested_at is not None


class QueueDashboard(Job):
    """No table of its own: a proxy of Job, only so that the admin index lists the queue
    dashboard with the app's models (its admin's list is the dashboard, admin/links.py)."""

    class Meta:
        proxy = True
        verbose_name = verbose_name_plural = "queue dashboard"


class Worker(models.Model):
    """A running worker process, as blueque keeps its listeners: who is alive, since when, doing
    how much. Rows are added at start, touched by every heartbeat, deleted at a clean exit, and
    reaped by maintenance when their heartbeat stops (their running jobs are then rescued)."""

    name = models.CharField(max_length=255, unique=True)  # also Job.claimed_by of its jobs
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()  # in its own pid namespace
    queues = models.JSONField(default=list, blank=True)  # [] means every queue
    concurrency = models.PositiveIntegerField()
    # By the database's clock, as maintenance judges them.
    started_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField()
    # Attempts, not jobs: a job retried twice counts three times.
    jobs_done = models.PositiveBigIntegerField("attempts run", default=0)
    # What proves that another process sees the same process table, so that a missing pid means
    # a dead worker (worker/identity.py): the kernel's boot id and the inode of the pid
    # namespace. A host name proves nothing: containers share them. NULL where unknown (macOS,
    # rows of older versions): such a worker is judged by its heartbeat alone.
    boot_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    pid_namespace = models.PositiveBigIntegerField(null=True, blank=True)
    # Its LEASE_SECONDS: it is silent, hence dead, after two of its own leases without a heartbeat.
    lease_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["host", "started_at"]

    def __str__(self):
        return self.name


class Queue(models.Model):
    """What operators set for one queue, read by every worker's claim (docs/limits.md): a pause,
    and limits on running jobs and on starts, for the whole queue and for each concurrency key.

    A queue needs no row: without one (or with every limit empty and no pause) its jobs are
    claimed by the plain single-statement claim. Rows are written by ``queue_control`` (code,
    the admin, ``manage.py queues``). The claim of a limited queue updates the row first, which
    serialises the claims of that queue (a row lock on PostgreSQL, the write lock on SQLite),
    and keeps the start times the rate limits count in ``recent_starts``.
    """

    name = models.CharField(max_length=100, unique=True)  # a Job.queue
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.CharField(max_length=150, blank=True)
    # Empty means no limit. Running jobs of the queue at once, across every worker and host.
    concurrency_limit = models.PositiveIntegerField(null=True, blank=True)
    # Starts per rate period, of the whole queue and of each concurrency key.
    rate_limit = models.PositiveIntegerField(null=True, blank=True)
    rate_period_seconds = models.FloatField(default=1.0)
    # Running jobs at once, and starts per rate period, of each concurrency key of the queue.
    key_concurrency_limit = models.PositiveIntegerField(null=True, blank=True)
    key_rate_limit = models.PositiveIntegerField(null=True, blank=True)
    # The claim's own bookkeeping: {"": [start, ...], key: [start, ...]}, POSIX seconds by the
    # database's clock, of the starts still inside the rate period.
    recent_starts = models.JSONField(default=dict, blank=True, editable=False)
    last_claim_at = models.DateTimeField(null=True, blank=True, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [("pause_queue", "Can pause and resume queues")]
        constraints = [
            models.CheckConstraint(condition=Q(rate_period_seconds__gt=0),
                                   name="sqlqueue_queue_rate_period_positive"),
        ]

    def __str__(self):
        return self.name

    @property
    def is_paused(self) -> bool:
        return self.paused_at is not None

    @property
    def is_limited(self) -> bool:
        """Whether the claim of this queue must count (one limit or more is set)."""
        return any(limit is not None for limit in (
            self.concurrency_limit, self.rate_limit, self.key_concurrency_limit,
            self.key_rate_limit))

    def describe_limits(self) -> str:
        """``3 running, 10 starts per 1 s; per key: 1 running`` or ``none``."""
        period = f"{self.rate_period_seconds:g} s"
        whole = [f"{self.concurrency_limit} running" if self.concurrency_limit is not None else "",
                 f"{self.rate_limit} starts per {period}" if self.rate_limit is not None else ""]
        key = [f"{self.key_concurrency_limit} running"
               if self.key_concurrency_limit is not None else "",
               f"{self.key_rate_limit} starts per {period}"
               if self.key_rate_limit is not None else ""]
        text = ", ".join(part for part in whole if part)
        if any(key):
            text += ("; " if text else "") + "per key: " + ", ".join(part for part in key if part)
        return text or "none"


class Leader(models.Model):
    """Who does a cluster-wide duty, one row per duty (``"maintenance"``): a lease held by one
    worker until ``expires_at``, renewed by the holder, taken over by another once it runs out
    (worker/leader.py). Times are the database's clock."""

    name = models.CharField(max_length=100, primary_key=True)
    holder = models.CharField(max_length=255)  # a Worker.name, or another caller's id
    elected_at = models.DateTimeField()  # start of the holder's current reign
    expires_at = models.DateTimeField()

    def __str__(self):
        return f"{self.name}: {self.holder}"


class ThroughputCount(models.Model):
    """How many jobs of a queue and task ended with a final status in one minute or one hour:
    the rollup the dashboard and ``manage.py stats`` read throughput from, so that counting a
    week of finished jobs reads a few hundred rows, not millions (worker/rollup.py writes them;
    throughput.py reads them). Kept after the jobs themselves are pruned."""

    MINUTE, HOUR = 60, 3600

    period_seconds = models.PositiveIntegerField()  # MINUTE or HOUR
    bucket_at = models.DateTimeField()  # the start of the minute or hour, UTC
    queue = models.CharField(max_length=100)
    task_name = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=JobStatus.choices)  # a final status
    count = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["period_seconds", "bucket_at", "queue", "task_name", "status"],
                name="sqlqueue_throughput_bucket",
            ),
        ]

    def __str__(self):
        return f"{self.queue} {self.task_name} {self.status} @ {self.bucket_at}: {self.count}"


class ThroughputCursor(models.Model):
    """One row: every job that finished before ``rolled_up_to`` is counted in ThroughputCount;
    later ones are counted from the job table itself. Moved forward, fenced on its old value,
    in the same transaction as the counts it covers."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    rolled_up_to = models.DateTimeField()

    def __str__(self):
        return f"rolled up to {self.rolled_up_to}"


def _schedule_entry(payload) -> dict:
    entry = payload.get("schedule") if isinstance(payload, dict) else None
    return entry if isinstance(entry, dict) else {}


class Schedule(models.Model):
    """A periodic schedule: when to enqueue which task with which arguments (docs/schedules.md).

    Rows are written by the sync from code (``@schedule`` declarations, when a worker starts):
    the definition columns follow the code, and a schedule gone from the code is *retired*
    (``retired_at``), never deleted or left firing. The operator's state (``paused_at``) is
    never touched by a sync, so a paused schedule stays paused across deploys.

    ``next_run_at`` is the cursor: the first tick not yet handled. The scheduler of any worker
    enqueues due ticks and moves the cursor in one transaction that first updates this row
    fenced on the cursor and ``version`` as it read them (scheduling.py), so each tick is
    decided once, by one process. A row is self-contained: the job options are resolved when
    it is synced, so any worker can enqueue its ticks without the task's code.
    """

    MISSED_CHOICES = [
        (tick_plan.LATEST, "run the latest once"),
        (tick_plan.SKIP, "skip"),
        (tick_plan.CATCH_UP, "catch up"),
    ]

    name = models.CharField(max_length=150, unique=True)
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
    missed = models.CharField(max_length=16, choices=MISSED_CHOICES, default=tick_plan.LATEST)
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
                condition=Q(missed__in=tick_plan.POLICIES), name="sqlqueue_schedule_missed_valid"
            ),
        ]

    def __str__(self):
        return self.name

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
        return _timetable(self.cron, self.every_seconds, self.timezone)

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


@functools.lru_cache(maxsize=256)
def _timetable(cron, every_seconds, timezone):
    if cron:
        return timetables.CronTimetable(cron, timezone)
    return timetables.IntervalTimetable(every_seconds)
