"""Job, the table of jobs: one row per unit of work, from enqueue to its final status."""

import datetime as dt

from django.db import models, router, transaction
from django.db.models.functions import Now

from ..conf import QueueSettings
from ..db import job_table
from ..run import outcomes
from ..run.progress import Progress
from ..statuses import FINISHED_STATUSES, JobStatus
from ..transitions.deleted import settle_deleted
from ..waiting import waiter
from .dependency import parent_results
from .job_queryset import JobQuerySet
from .step import record_step, recorded_step, recorded_steps

#: The built-in settings: the database defaults of the columns (not the project's SQLQUEUE).
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
    # "traceback", "worker"}, and "interrupted": true for an interruption (run/outcomes.py).
    errors = models.JSONField(db_default=models.Value("[]"))
    # NULL, not "", means "no key": the partial unique index skips NULLs.
    unique_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # A unique key with its own statuses or period (unique_states, unique_period): the key, and
    # with a period the start of the enqueue's period ("sync-42@2026-11-26T02:05:00+00:00");
    # held while the status is one of the bits of unique_states (db/job_table.py). Such a job
    # has no unique_key: the two kinds of key never collide. NULL for every other job.
    unique_slot = models.CharField(  # noqa: DJ001
        max_length=300, null=True, blank=True, editable=False)
    unique_states = models.PositiveSmallIntegerField(null=True, blank=True, editable=False)
    # Labels and a small JSON object given at enqueue (or by @job), for the job to read and
    # for operators to search by (JobQuerySet.tagged). NULL when none were given.
    tags = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(null=True, blank=True)
    # Jobs sharing a key count against the per-key limits of their queue (Queue). "" is no key,
    # not NULL: the claim reads the jobs without a key in claim order from the same index as a
    # key's (sqlqueue_job_ready_by_key); PostgreSQL keeps an index's order after "= ''", not
    # after "IS NULL" (it sorted every unkeyed ready row of the queue).
    concurrency_key = models.CharField(max_length=255, blank=True, db_default="")
    # The OpenTelemetry context of the enqueue ({"traceparent": ...}), which the run's span links
    # to (tracing.py); NULL without tracing, or in rows inserted by hand.
    trace_context = models.JSONField(null=True, blank=True, editable=False)
    # Workflows (docs/workflows.md): the workflow the job belongs to (NULL: none, as for every
    # job enqueued alone), and how many of its parents (JobDependency) have not finished yet;
    # a waiting job is queued when that reaches 0 (transitions/settle.py).
    workflow_id = models.UUIDField(null=True, blank=True, editable=False)
    parents_pending = models.PositiveIntegerField(db_default=0, editable=False)
    # The latest progress the job reported (run/progress.py: written at most every
    # PROGRESS_INTERVAL_SECONDS, fenced by the claim token); all NULL until it reports. A retry
    # keeps the last attempt's value until the new attempt reports. Plain BigIntegerFields, not
    # Positive ones: their CHECK would make PostgreSQL scan the table under its lock when the
    # column is added; report_progress checks the sign.
    progress_done = models.BigIntegerField(null=True, blank=True, editable=False)
    progress_total = models.BigIntegerField(null=True, blank=True, editable=False)
    progress_message = models.CharField(  # noqa: DJ001 - NULL: never reported
        max_length=job_table.MAX_PROGRESS_MESSAGE_CHARS, null=True, blank=True, editable=False)
    progress_at = models.DateTimeField(null=True, blank=True, editable=False)
    # A transactional job (docs/transactional-jobs.md) runs inside the transaction that writes
    # its outcome: its own writes and its completion commit together, or neither does.
    transactional = models.BooleanField(db_default=False)
    # Someone waits for this job where NOTIFY can wake them (PostgreSQL, waiting/): the outcome
    # write that gives it a final status sends its id on the channel waiters LISTEN to. Set by
    # the first waiter, never cleared; false for every job nobody waits for, which the outcome
    # write then reads and does nothing more for.
    awaited = models.BooleanField(db_default=False, editable=False)

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

    @classmethod
    def check(cls, **kwargs):
        # No models.W036/W037 on MariaDB: our migrations stand in (db/job_table.py).
        return job_table.without_handled_warnings(super().check(**kwargs))

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

    # Outcomes of a claimed job (run/outcomes.py). Each is fenced by the claim token and returns
    # True if it was applied, False if the job is no longer this claim's (lease lost, rescued,
    # re-claimed).
    def complete(self, result=None, *, now=None) -> bool:
        return outcomes.complete(self, result, now=now)

    def fail(self, error, *, retry=True, delay=None, now=None) -> bool:
        return outcomes.fail(self, error, retry=retry, delay=delay, now=now)

    def reschedule(self, *, run_at=None, delay=None, now=None) -> bool:
        return outcomes.reschedule(self, run_at=run_at, delay=delay, now=now)

    def release(self, *, now=None) -> bool:
        return outcomes.release(self, now=now)

    def delete(self, using=None, keep_parents=False):
        """Django's ``delete()``; a workflow's job that had not finished settles the jobs
        waiting for it as a cancelled one would, in the same transaction
        (transitions/deleted.py)."""
        if self.workflow_id is None:
            return super().delete(using=using, keep_parents=keep_parents)
        alias = using or router.db_for_write(type(self), instance=self)
        pk = self.pk
        with transaction.atomic(using=alias, savepoint=False):
            deleted = super().delete(using=alias, keep_parents=keep_parents)
            settle_deleted(type(self), alias, [pk])
        return deleted

    delete.alters_data = True

    def cancel(self, *, by=None, now=None) -> bool:
        """Cancel this job: at once if it has not started; if it is running, ask its worker to
        stop it (it ends ``cancelled``; see ``JobQuerySet.cancel``). ``by``: who asked (kept in
        ``cancelled_by``). False if it had finished, or its cancel was already asked for."""
        applied = Job.objects.using(self._state.db).filter(pk=self.pk).cancel(by=by, now=now) == 1
        if applied:
            self.refresh_from_db(fields=["status", "finished_at", "cancel_requested_at",
                                         "cancelled_by"])
        return applied

    # ---- waiting (docs/waiting.md) ---------------------------------------------------------
    def wait_finished(self, *, timeout: float | None) -> "Job":
        """Block until this job has a final status (succeeded, exhausted, cancelled, expired),
        then return it read again: its ``status``, ``result`` and ``errors`` say how it ended.
        Raises ``WaitTimeout`` after ``timeout`` seconds (None: no limit); the job goes on.
        Woken by NOTIFY on PostgreSQL, by a short adaptive poll elsewhere."""
        waiter.wait(type(self), self._state.db or "default", [self.pk], timeout=timeout)
        self.refresh_from_db()
        return self

    async def await_finished(self, *, timeout: float | None) -> "Job":
        """``wait_finished``'s async twin: it never blocks the event loop."""
        await waiter.await_(type(self), self._state.db or "default", [self.pk], timeout=timeout)
        await self.arefresh_from_db()
        return self

    # ---- workflows (docs/workflows.md) ----------------------------------------------------
    def parent_results(self) -> list:
        """The results of this job's parents in a workflow, in their order (a chord's group
        order), as stored: None for a parent that did not succeed (a dependency that runs
        anyway) or that was pruned."""
        return parent_results(self)

    def parents(self):
        """This job's parents in a workflow, in their order."""
        return Job.objects.using(self._state.db).filter(child_links__child=self).order_by(
            "child_links__position")

    def children(self):
        """The jobs that wait for this one in a workflow."""
        return Job.objects.using(self._state.db).filter(parent_links__parent=self).order_by("pk")

    # ---- durable steps (docs/steps.md): what run/steps.py reads and writes --------------
    def recorded_steps(self) -> dict:
        """The results of this job's recorded steps by name (one query)."""
        return recorded_steps(self)

    def recorded_step(self, name: str):
        """The recorded result of this job's step ``name``."""
        return recorded_step(self, name)

    def record_step(self, name: str, result, **times) -> None:
        """Record a completed step (IntegrityError: another run recorded it first)."""
        record_step(self, name, result, **times)

    @property
    def progress(self):
        """The latest progress this job reported (``done``, ``total``, ``fraction``,
        ``percent``, ``message``, ``at``: a ``run.progress.Progress``), as last read from the
        row; None if it never did."""
        deferred = self.get_deferred_fields().intersection(job_table.PROGRESS_COLUMNS)
        if deferred and self.pk is not None:  # a claimed job: one query for the four
            self.refresh_from_db(fields=sorted(deferred))
        if self.progress_at is None or self.progress_done is None:
            return None
        return Progress(self.progress_done, self.progress_total,
                                 self.progress_message or "", self.progress_at)

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


def _schedule_entry(payload) -> dict:
    entry = payload.get("schedule") if isinstance(payload, dict) else None
    return entry if isinstance(entry, dict) else {}
