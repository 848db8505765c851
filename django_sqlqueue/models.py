"""The Job table. Statuses and their transitions are described in docs/concepts.md."""

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from . import outcomes
from .conf import QueueSettings
from .queries import JobQuerySet
from .statuses import FINISHED_STATUSES, READY_STATUSES, UNFINISHED_STATUSES, JobStatus
from .validation import MAX_PRIORITY, MIN_PRIORITY

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

    result = models.JSONField(null=True, blank=True)
    # One entry per failed attempt: {"attempt", "at", "type", "message", "traceback", "worker"}.
    errors = models.JSONField(db_default=models.Value("[]"))
    # NULL, not "", means "no key": the partial unique index skips NULLs.
    unique_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001

    objects = JobQuerySet.as_manager()

    class Meta:
        # Operator actions of the admin, each granted on its own; deleting uses "delete_job".
        permissions = [
            ("retry_job", "Can retry failed, exhausted, cancelled or expired jobs now"),
            ("run_job_now", "Can run scheduled or waiting jobs now"),
            ("cancel_job", "Can cancel jobs that have not started"),
        ]
        indexes = [
            # The claim query of a worker with --queue: ready rows of that queue in claim order.
            # Partial, so it holds only ready rows and claiming costs the same with ten or ten
            # million finished jobs.
            models.Index(
                fields=["queue", "-priority", "run_at", "id"],
                name="sqlqueue_job_ready",
                condition=Q(status__in=READY_STATUSES),
            ),
            # The claim query of a worker serving every queue (the default). Without it, that
            # claim sorts every ready row to find the first few (20,000 ready rows: 13 ms per
            # claim instead of 0.3 ms). One more entry per insert, in an index as small as the
            # number of ready jobs.
            models.Index(
                fields=["-priority", "run_at", "id"],
                name="sqlqueue_job_ready_any_queue",
                condition=Q(status__in=READY_STATUSES),
            ),
            # The lease rescuer's scan: running rows by lease expiry. Partial, so it stays as
            # small as the number of jobs running right now.
            models.Index(
                fields=["lease_expires_at"],
                name="sqlqueue_job_leases",
                condition=Q(status=JobStatus.RUNNING),
            ),
            # The expirer's scan: waiting jobs that have an expires_at. Without it, each
            # maintenance pass read every waiting row (200,000 waiting jobs: a 0.3 s UPDATE, the
            # longest transaction of a busy drain); with it, only jobs given a max_age are in it.
            models.Index(
                fields=["expires_at"],
                name="sqlqueue_job_expiring",
                condition=Q(status__in=READY_STATUSES, expires_at__isnull=False),
            ),
        ]
        constraints = [
            # At most one unfinished job per unique key; the key is free again once it finishes.
            models.UniqueConstraint(
                fields=["unique_key"],
                name="sqlqueue_job_unique_key",
                condition=Q(status__in=UNFINISHED_STATUSES, unique_key__isnull=False),
            ),
            # Rows inserted by SQL are checked by the database itself.
            models.CheckConstraint(
                condition=Q(status__in=JobStatus.values), name="sqlqueue_job_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=MIN_PRIORITY, priority__lte=MAX_PRIORITY),
                name="sqlqueue_job_priority_range",
            ),
            models.CheckConstraint(
                condition=Q(max_attempts__gte=1), name="sqlqueue_job_max_attempts_positive"
            ),
        ]

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

    def cancel(self, *, now=None) -> bool:
        """Cancel this job if it has not started (queued, or waiting for a retry)."""
        applied = Job.objects.using(self._state.db).filter(pk=self.pk).cancel(now=now) == 1
        if applied:
            self.refresh_from_db(fields=["status", "finished_at"])
        return applied


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
