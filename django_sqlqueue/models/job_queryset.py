"""JobQuerySet, the manager of Job: filters are adjectives (``ready``), state changes are verbs
(``claim``).

The models sit above their duties (enqueue/, claim/, transitions/...): a state change here hands
its work down to its duty with this queryset, which brings the model; no duty imports the
models or calls these methods back (docs/internals.md)."""

import datetime as dt

from asgiref.sync import sync_to_async
from django.db import connections, models, router, transaction
from django.db.models import Q
from django.utils import timezone

from ..claim import limited, plain
from ..conf import get_settings
from ..db import ops
from ..db.batches import retrying_deadlocks
from ..db.clock import DatabaseNow
from ..db.job_table import CLAIM_ORDER
from ..enqueue import inserting, registered
from ..enqueue.building import ENQUEUE_OPTIONS
from ..enqueue.many_calls import enqueue_calls
from ..statuses import (
    FINISHED_STATUSES,
    READY_STATUSES,
    UNFINISHED_STATUSES,
    JobStatus,
)
from ..transitions import changes
from ..transitions import deleted as deleted_parents
from .job_maintenance import JobMaintenance
from .queue import Queue
from .queue_stats import QueueStats, queue_stats

# CLAIM_ORDER and QueueStats are documented as names of this module (docs/api.md).
__all__ = ["CLAIM_ORDER", "JobQuerySet", "QueueStats"]


class JobQuerySet(JobMaintenance, models.QuerySet):
    """The jobs, filtered and changed; what maintenance and heartbeats change is
    ``JobMaintenance``'s (``job_maintenance.py``)."""

    # ---- filters -------------------------------------------------------------------------
    def in_ready_status(self):
        """Queued and failed-awaiting-retry jobs, due or not: the rows the ready indexes hold.
        On MariaDB, which has no partial indexes, the condition also names the generated column
        its ready indexes lead with, or every read of ready rows would scan the whole table."""
        rows = self.filter(status__in=READY_STATUSES)
        return ops(connections[self.db]).ready_rows(rows)

    def ready(self, now=None):
        """Jobs a worker may start now: queued or failed-awaiting-retry, due, not expired.
        "Now" is the database's clock unless ``now`` is given."""
        now = now or DatabaseNow(in_filter=True)
        return self.in_ready_status().filter(run_at__lte=now).filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=now)
        )

    def unfinished(self):
        return self.filter(status__in=UNFINISHED_STATUSES)

    def finished(self):
        return self.filter(status__in=FINISHED_STATUSES)

    def running(self):
        return self.filter(status=JobStatus.RUNNING)

    def lease_expired(self, now=None):
        """Running jobs whose worker stopped renewing the lease (or that never had one: a row
        written as 'running' by hand). "Now" is the database's clock unless ``now`` is given."""
        return self.running().filter(
            Q(lease_expires_at__lt=now or DatabaseNow(in_filter=True))
            | Q(lease_expires_at__isnull=True)
        )

    def prunable(self, now=None, *, keep_succeeded=None, keep_failed=None):
        """Finished jobs past their retention: ``succeeded`` ones that finished more than
        ``keep_succeeded`` seconds ago, ``exhausted``, ``cancelled`` and ``expired`` ones more than
        ``keep_failed`` seconds ago (None keeps them). "Now" is the database's clock unless
        ``now`` is given."""
        rules = Q()
        for statuses, keep in (
            ([JobStatus.SUCCEEDED], keep_succeeded),
            ([s for s in FINISHED_STATUSES if s != JobStatus.SUCCEEDED], keep_failed),
        ):
            if keep is not None:
                cutoff = (DatabaseNow(-float(keep), in_filter=True) if now is None
                          else now - dt.timedelta(seconds=keep))
                rules |= Q(status__in=statuses, finished_at__lt=cutoff)
        return self.filter(rules) if rules else self.none()

    def in_queues(self, queues):
        """Jobs of the given queue names; ``None`` means every queue."""
        if queues is None:
            return self
        if isinstance(queues, str):
            queues = [queues]
        return self.filter(queue__in=list(queues))

    def tagged(self, *tags):
        """Jobs that have every one of ``tags``. PostgreSQL looks them up in the GIN index of
        tags; SQLite and MariaDB read each job's tags (no index serves it there: filter by
        queue, task or time too on a big table)."""
        if not tags or not all(isinstance(tag, str) and tag for tag in tags):
            raise ValueError(f"tagged() takes one or more tags (non-empty strings), not {tags!r}.")
        return ops(connections[self.db]).tagged_rows(self, tags)

    # ---- enqueue -------------------------------------------------------------------------
    def _write_alias(self, using=None) -> str:
        return using or self._db or router.db_for_write(self.model)

    def prepare(self, task, args=(), kwargs=None, **options):
        """An unsaved, validated Job: what ``enqueue`` would insert. For ``bulk_enqueue``."""
        return registered.prepare(self.model, task, args, kwargs, options)

    def enqueue(self, task, args=(), kwargs=None, *, using=None, **options):
        """Validate and insert one job, in the current transaction of its database.

        ``task`` is a ``@job`` function or its registered name. Options: ``queue``, ``priority``
        (-100..100, higher first), ``run_at`` or ``delay``, ``max_attempts``, ``max_age``,
        ``unique_key`` (with ``unique_states`` and ``unique_period``), ``tags``, ``metadata``,
        ``concurrency_key`` (docs/limits.md), ``retry_backoff`` /
        ``retry_min_delay`` / ``retry_max_delay`` / ``retry_jitter``, and ``using`` (database
        alias; default: the router's choice for Job).

        With a ``unique_key`` that an unfinished job already holds (or, with ``unique_states`` or
        ``unique_period``, a job in those statuses or that period), nothing is inserted and that
        job is returned instead.
        """
        return self.enqueue_prepared(self.prepare(task, args, kwargs, **options), using=using)

    def enqueue_prepared(self, job, *, using=None):
        """Insert a job from ``prepare()``; with a taken unique key, return the holder instead."""
        return inserting.insert_job(job, self._write_alias(using))

    def bulk_enqueue(self, jobs, *, using=None, batch_size=1000) -> list:
        """Insert many prepared jobs (``task.prepare(...)``) in as few statements as possible.

        The jobs are enqueued now: each gets this moment as its ``enqueued_at``, and a job that
        was due when it was prepared (no ``run_at`` or ``delay``) is due from this moment. One
        time for the whole call also lets the insert send it once instead of once per job.
        """
        return inserting.bulk_enqueue(self.model, jobs, self._write_alias(using),
                                      batch_size=batch_size)

    def enqueue_many(self, task, calls, *, using=None, batch_size=1000, **options) -> list:
        """Insert one job of ``task`` per call in ``calls``, with the same ``options`` for all
        (``enqueue``'s, but ``unique_key``), in as few statements as possible; returns the new
        jobs' ids, in the order of ``calls``. A call is a tuple of positional arguments, or a
        dict of keyword arguments: ``Job.objects.enqueue_many(send, [(1,), (2,)])``. Every
        call is checked before anything is inserted. Makes no Job object per call, which is
        what makes it faster than ``bulk_enqueue`` (docs/api.md)."""
        registered.check_option_names(options, allowed=ENQUEUE_OPTIONS, where="enqueue_many()")
        return enqueue_calls(self.model, registered.resolve(task), calls,
                             self._write_alias(using), options, batch_size=batch_size)

    # The async twins: the sync call on the thread of the caller's sync work (as django.tasks'
    # aenqueue), so that inside its atomic block the job joins its transaction.
    async def aenqueue(self, task, args=(), kwargs=None, *, using=None, **options):
        """``enqueue`` for async code: ``await Job.objects.aenqueue(task, ...)``."""
        return await sync_to_async(self.enqueue, thread_sensitive=True)(
            task, args, kwargs, using=using, **options)

    async def aenqueue_prepared(self, job, *, using=None):
        """``enqueue_prepared`` for async code."""
        return await sync_to_async(self.enqueue_prepared, thread_sensitive=True)(job, using=using)

    async def aenqueue_many(self, task, calls, *, using=None, batch_size=1000,
                            **options) -> list:
        """``enqueue_many`` for async code."""
        return await sync_to_async(self.enqueue_many, thread_sensitive=True)(
            task, calls, using=using, batch_size=batch_size, **options)

    async def abulk_enqueue(self, jobs, *, using=None, batch_size=1000) -> list:
        """``bulk_enqueue`` for async code."""
        return await sync_to_async(self.bulk_enqueue, thread_sensitive=True)(
            jobs, using=using, batch_size=batch_size)

    # ---- claim ---------------------------------------------------------------------------
    def claim(self, queues=None, worker_id="", *, limit=1, lease=None, now=None,
              controls=None, after=None) -> list:
        """Claim up to ``limit`` ready jobs for ``worker_id`` and return them, running.

        The jobs are picked in claim order with ``FOR UPDATE SKIP LOCKED`` and updated in the
        same statement: status running, one more attempt, claimed_by/at, a lease until now +
        ``lease`` (seconds or timedelta; default SQLQUEUE["LEASE_SECONDS"]), and a fresh claim
        token that fences every later outcome write. The statement commits on its own (or with
        the caller's transaction, inside ``atomic()``).

        Paused queues are skipped and limited ones claimed within their limits
        (claim/limited.py), as the Queue table says: read now, or as given in ``controls``
        (``claim.limited.read_controls``; a worker reads it once per poll interval). With no
        queue paused or limited, the claim is the one statement above.

        ``after``: a position in claim order, ``(priority, run_at, id)``; only jobs after it
        are claimed (``ready_ids_after``), so that the scan starts there. A worker passes
        the last job it claimed when its claims got slow (claim/bounded.py). Ignored
        while some queue is paused or limited, and by a filtered queryset's claim.
        """
        if isinstance(queues, str):
            queues = [queues]
        elif queues is not None:
            queues = list(dict.fromkeys(queues))
        if limit < 1 or queues == []:
            return []
        lease_seconds = get_settings().LEASE_SECONDS if lease is None else lease
        if hasattr(lease_seconds, "total_seconds"):
            lease_seconds = lease_seconds.total_seconds()
        if controls is None:
            controls = limited.read_controls(Queue, self._write_alias())
        if controls.unused:
            return plain.claim_ready(self, queues, worker_id, limit, lease_seconds, now,
                                     after=after)
        return limited.claim_controlled(self, queues, worker_id, limit, lease_seconds, now,
                                        controls)

    # ---- bulk state changes --------------------------------------------------------------
    def cancel(self, now=None, *, by=None) -> int:
        """Cancel the jobs of this queryset that have not finished; returns how many.

        Jobs that have not started (queued, waiting for their workflow's parents, or failed and
        waiting for a retry) are cancelled at once (``finished_at`` = now), and so are the jobs
        of their workflows that wait for them (docs/workflows.md). Running jobs are asked to
        stop: ``cancel_requested_at`` is set now, their status stays ``running`` until their
        worker stops the attempt, and then (or if the worker is lost) it becomes ``cancelled``;
        they never run again. A running job already asked is not counted again. ``by`` says who
        asked (``cancelled_by``; the admin gives the user name). One UPDATE, so a job claimed
        meanwhile is asked to stop rather than missed; on PostgreSQL it also wakes the workers
        (NOTIFY) to learn of it at once (transitions/changes.py).
        """
        return changes.cancel(self, now, by=by)

    def delete(self):
        """Django's ``delete()``; a workflow's job that had not finished settles the jobs
        waiting for it as a cancelled one would, in the same transaction
        (transitions/deleted.py)."""
        if self.query.is_sliced:
            return super().delete()  # Django's TypeError, before a transaction is spoiled
        alias = self._write_alias()
        with transaction.atomic(using=alias, savepoint=False):
            in_workflows = list(self.using(alias).filter(workflow_id__isnull=False)
                                .values_list("pk", flat=True))
            deleted = super().delete()
            if in_workflows:
                deleted_parents.settle_deleted(self.model, alias, in_workflows)
        return deleted

    delete.alters_data = True
    delete.queryset_only = True

    def cancelling(self):
        """Running jobs asked to stop, whose worker has not stopped them yet."""
        return self.running().filter(cancel_requested_at__isnull=False)

    def cancelled_while_running(self):
        """Cancelled jobs that were running when the cancel was asked for."""
        return self.filter(status=JobStatus.CANCELLED, cancel_requested_at__isnull=False)

    def retry_now(self, now=None) -> int:
        """Queue failed, exhausted, cancelled and expired jobs again, due now; returns how many.

        Attempts never go down: a job with none left gets one more (max_attempts = attempts + 1).
        Its error history is kept, and its expiry is cleared so it cannot expire straight away.
        A job whose unique key another unfinished job holds now is skipped, as is one whose
        unique slot another job holds (``unique_states``). A workflow's job puts back to
        ``waiting`` the jobs its end had cancelled (docs/workflows.md;
        transitions/changes.py).
        """
        return changes.retry_now(self, now)

    def run_now(self, now=None) -> int:
        """Make waiting jobs (scheduled, or failed awaiting their retry) due now. Outside a
        transaction, a deadlock with the workers' writes is retried (``retrying_deadlocks``)."""
        now = now or timezone.now()
        due = self.in_ready_status().filter(run_at__gt=now)
        return retrying_deadlocks(self._write_alias(), lambda: due.update(run_at=now))

    # ---- stats ---------------------------------------------------------------------------
    def stats(self, now=None) -> dict:
        """``{queue: QueueStats}``: counts per status, and the lag of the oldest ready job
        (queue_stats.py)."""
        return queue_stats(self, now)
