"""JobQuerySet: filters are adjectives (``ready``), state changes are verbs (``claim``)."""

import datetime as dt

from django.db import connections, models, router, transaction
from django.db.models import Case, F, Max, Q, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone

from . import signals
from .claim import limited as queue_limits
from .claim import plain
from .claim.plain import CLAIM_ORDER
from .conf import get_settings
from .db import ops, returning
from .db.batches import short_transaction
from .db.clock import DatabaseNow
from .db.postgresql import notify as notify_sql
from .enqueue.building import ENQUEUE_OPTIONS, prepare_job
from .enqueue.inserting import insert_job, insert_jobs
from .enqueue.notify import CANCEL_CHANNEL, sends_notify
from .observability.queue_stats import QueueStats, queue_stats
from .registry import check_option_names, resolve
from .statuses import (
    FINISHED_STATUSES,
    READY_STATUSES,
    RETRYABLE_STATUSES,
    UNFINISHED_STATUSES,
    JobStatus,
)

# CLAIM_ORDER and QueueStats are documented as names of this module (docs/api.md).
__all__ = ["CLAIM_ORDER", "JobQuerySet", "QueueStats"]

#: The error type a rescue records: ``outcomes.WorkerLost``, named here so this module does not
#: import outcomes (a test pins the two together).
WORKER_LOST_TYPE = "django_sqlqueue.outcomes.WorkerLost"


class JobQuerySet(models.QuerySet):
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

    # ---- enqueue -------------------------------------------------------------------------
    def _write_alias(self, using=None) -> str:
        return using or self._db or router.db_for_write(self.model)

    def prepare(self, task, args=(), kwargs=None, **options):
        """An unsaved, validated Job: what ``enqueue`` would insert. For ``bulk_enqueue``."""
        check_option_names(options, allowed=ENQUEUE_OPTIONS, where="enqueue()")
        return prepare_job(self.model, resolve(task), args, kwargs, options)

    def enqueue(self, task, args=(), kwargs=None, *, using=None, **options):
        """Validate and insert one job, in the current transaction of its database.

        ``task`` is a ``@job`` function or its registered name. Options: ``queue``, ``priority``
        (-100..100, higher first), ``run_at`` or ``delay``, ``max_attempts``, ``max_age``,
        ``unique_key``, ``concurrency_key`` (docs/limits.md), ``retry_backoff`` /
        ``retry_min_delay`` / ``retry_max_delay`` / ``retry_jitter``, and ``using`` (database
        alias; default: the router's choice for Job).

        With a ``unique_key`` that an unfinished job already holds, nothing is inserted and that
        job is returned instead.
        """
        return self.enqueue_prepared(self.prepare(task, args, kwargs, **options), using=using)

    def enqueue_prepared(self, job, *, using=None):
        """Insert a job from ``prepare()``; with a taken unique key, return the holder instead."""
        return insert_job(job, self._write_alias(using))

    def bulk_enqueue(self, jobs, *, using=None, batch_size=1000) -> list:
        """Insert many prepared jobs (``task.prepare(...)``) in as few statements as possible.

        The jobs are enqueued now: each gets this moment as its ``enqueued_at``, and a job that
        was due when it was prepared (no ``run_at`` or ``delay``) is due from this moment. One
        time for the whole call also lets the insert send it once instead of once per job.
        """
        jobs = list(jobs)
        pk_name = self.model._meta.pk.attname  # not job.pk: a property, slower
        for job in jobs:
            if not isinstance(job, self.model) or getattr(job, pk_name) is not None:
                raise TypeError(
                    "bulk_enqueue() takes unsaved jobs from task.prepare(...) or "
                    "Job.objects.prepare(...)."
                )
            if job.unique_key is not None:
                raise ValueError(
                    f"bulk_enqueue() cannot deduplicate unique_key {job.unique_key!r}: "
                    "enqueue unique jobs one at a time with enqueue()."
                )
        now = timezone.now()
        for job in jobs:
            if job.run_at == job.enqueued_at:
                job.run_at = now
            job.enqueued_at = now
        insert_jobs(jobs, self._write_alias(using), batch_size=batch_size)
        return jobs

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
        (``queue_limits.read_controls``; a worker reads it once per poll interval). With no
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
            controls = queue_limits.read_controls(self.model, self._write_alias())
        if controls.unused:
            return self.claim_ready(queues, worker_id, limit, lease_seconds, now, after=after)
        return queue_limits.claim_controlled(self, queues, worker_id, limit, lease_seconds, now,
                                             controls)

    def claim_ready(self, queues, worker_id, limit, lease_seconds, now=None, *,
                    after=None) -> list:
        """The claim of queues that no pause or limit holds back (``claim`` checked the
        arguments): one statement; with ``after``, of the jobs after that position only
        (claim/plain.py)."""
        return plain.claim_ready(self, queues, worker_id, limit, lease_seconds, now, after=after)

    def claim_picked(self, picked_sql, picked_params, worker_id, lease_seconds, now=None) -> list:
        """Set the rows whose ids ``picked_sql`` selects running for ``worker_id``, in one
        statement, and return them as jobs in claim order (claim/plain.py)."""
        return plain.claim_picked(self, picked_sql, picked_params, worker_id, lease_seconds, now)

    # ---- bulk state changes --------------------------------------------------------------
    def cancel(self, now=None, *, by=None) -> int:
        """Cancel the jobs of this queryset that have not finished; returns how many.

        Jobs that have not started (queued, or failed and waiting for a retry) are cancelled at
        once (``finished_at`` = now). Running jobs are asked to stop: ``cancel_requested_at`` is
        set now, their status stays ``running`` until their worker stops the attempt, and then
        (or if the worker is lost) it becomes ``cancelled``; they never run again. A running job
        already asked is not counted again. ``by`` says who asked (``cancelled_by``; the admin
        gives the user name). One UPDATE, so a job claimed meanwhile is asked to stop rather
        than missed; on PostgreSQL it also wakes the workers (NOTIFY) to learn of it at once.
        """
        now = now or timezone.now()
        alias = self._write_alias()
        ready = Q(status__in=READY_STATUSES)
        changed = self.filter(
            ready | Q(status=JobStatus.RUNNING, cancel_requested_at__isnull=True)
        ).update(
            finished_at=Case(When(ready, then=Value(now)), default=F("finished_at"),
                             output_field=models.DateTimeField()),
            # Set only for running jobs: it means "asked to stop while it ran", and it is what
            # makes every later outcome write of that attempt write ``cancelled``.
            cancel_requested_at=Case(When(ready, then=None), default=Value(now),
                                     output_field=models.DateTimeField()),
            cancelled_by=by,
            # Last: MariaDB assigns left to right, each later assignment seeing the new status
            # (PostgreSQL and SQLite: every one sees the row as it was).
            status=Case(When(ready, then=Value(JobStatus.CANCELLED)), default=F("status")),
        )
        if changed and sends_notify(connections[alias]):
            with connections[alias].cursor() as cursor:
                cursor.execute(notify_sql(), [CANCEL_CHANNEL, ""])
        return changed

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
        A job whose unique key another unfinished job holds now is skipped.
        """
        now = now or timezone.now()
        taken_keys = self.model.objects.using(self.db).unfinished().filter(
            unique_key__isnull=False
        ).values("unique_key")
        retryable = self.filter(status__in=RETRYABLE_STATUSES).exclude(unique_key__in=taken_keys)
        # Of several selected jobs sharing a unique key, only the newest can hold it again.
        newest_per_key = (
            retryable.filter(unique_key__isnull=False).values("unique_key")
            .annotate(newest=Max("pk")).values("newest")
        )
        return (
            self.model.objects.using(self.db)
            .filter(pk__in=retryable.values("pk"))
            .filter(Q(unique_key__isnull=True) | Q(pk__in=newest_per_key))
            .update(
                status=JobStatus.QUEUED, run_at=now, finished_at=None, expires_at=None,
                lease_expires_at=None, cancel_requested_at=None, cancelled_by=None,
                max_attempts=Greatest(F("max_attempts"), F("attempts") + 1),
            )
        )

    def run_now(self, now=None) -> int:
        """Make waiting jobs (scheduled, or failed awaiting their retry) due now."""
        now = now or timezone.now()
        return self.in_ready_status().filter(run_at__gt=now).update(run_at=now)

    def expire(self, now=None, *, limit=None) -> int:
        """Mark ready jobs past their expires_at as expired, so they never run; returns how many.
        With ``limit``, at most that many (one batch of the expirer). "Now" is the database's
        clock unless ``now`` is given."""
        at = now or DatabaseNow(in_filter=True)
        due = self.in_ready_status().filter(expires_at__lte=at)
        if limit is not None:
            picked = due.order_by().values_list("pk", flat=True)[:limit]
            if not connections[self._write_alias()].features.allow_sliced_subqueries_with_in:
                picked = list(picked)  # MariaDB: no LIMIT in an IN subquery
            due = self.model.objects.using(self._write_alias()).in_ready_status().filter(
                pk__in=picked, expires_at__lte=at
            )
        return due.update(status=JobStatus.EXPIRED, finished_at=now or DatabaseNow())

    def extend_leases(self, worker_id, job_ids, *, lease=None, now=None) -> int:
        """Renew the leases of ``worker_id``'s running jobs among ``job_ids`` (a heartbeat)."""
        if not job_ids:
            return 0
        seconds = get_settings().LEASE_SECONDS if lease is None else lease
        # By the database's clock, like the claim's lease, unless ``now`` is given.
        expires_at = (DatabaseNow(seconds) if now is None
                      else now + dt.timedelta(seconds=seconds))
        return self.running().filter(pk__in=list(job_ids), claimed_by=worker_id).update(
            lease_expires_at=expires_at
        )

    def rescue(self, now=None, *, reason="its lease expired", limit=500) -> int:
        """Give back the running jobs of this queryset as interrupted by the loss of their
        worker, up to ``limit`` (None: all), oldest lease first, in one UPDATE; returns how many.

        Each becomes ``queued``, due now, its attempt not counted, or ``exhausted`` at its
        ``max_interruptions``, with a ``WorkerLost`` entry in ``errors`` naming ``reason``
        (the driver's ``rescue_jobs``). Fenced on the claim token and the
        lease as read, so a job whose lease is renewed meanwhile is left alone; on PostgreSQL
        rows locked by someone else are skipped. "Now" is the database's clock unless ``now`` is
        given. Takes every running job of the queryset, expired lease or not: narrow it first.
        """
        alias = self._write_alias()
        connection = connections[alias]
        picked = self.running().order_by("lease_expires_at", "pk").values(
            "id", "claim_token", "lease_expires_at"  # the names rescue_jobs reads
        )
        if connection.features.has_select_for_update_skip_locked:
            picked = picked.select_for_update(skip_locked=True)
        if limit is not None:
            picked = picked[:limit]
        # FOR UPDATE needs a transaction, even for one statement; inside a caller's, no savepoint.
        with transaction.atomic(using=alias, savepoint=False):
            picked_sql, picked_params = picked.query.get_compiler(using=alias).as_sql()
            rescued = returning.fetch(connection, *ops(connection).rescue_jobs(
                self.model, picked_sql=picked_sql, picked_params=picked_params, now=now,
                error_type=WORKER_LOST_TYPE, reason=reason,
                message_limit=get_settings().MAX_TRACEBACK_CHARS))
            if rescued and signals.has_receivers(signals.job_rescued, self.model):
                self._send_rescued([pk for pk, _ in rescued], alias, reason)
        return len(rescued)

    def _send_rescued(self, pks, alias, reason) -> None:
        """``job_rescued`` for each rescued job, read as written (in the rescue's
        transaction, so as this rescue left it), sent once that transaction commits."""
        jobs = [job for job in self.model.objects.using(alias).filter(pk__in=pks).order_by("pk")
                if signals.is_job_function(job)]

        def send():
            for job in jobs:
                signals.send(signals.job_rescued, self.model, job=job, reason=reason,
                             will_retry=job.status == JobStatus.QUEUED)

        transaction.on_commit(send, using=alias)

    def prune(self, now=None, *, keep_succeeded=None, keep_failed=None, batch_size=1000) -> int:
        """Delete finished jobs older than the retention (seconds; None keeps them), in batches
        of ``batch_size``, each its own short transaction (see ``prunable``)."""
        return self.prunable(
            now, keep_succeeded=keep_succeeded, keep_failed=keep_failed
        ).delete_in_batches(batch_size)

    def delete_in_batches(self, batch_size=1000, *, progress=None, statement_timeout=None) -> int:
        """Delete this queryset's jobs ``batch_size`` at a time, in id order, each batch its own
        short transaction (a savepoint inside the caller's), so no statement holds locks on many
        rows for long; ``progress(deleted_so_far)`` is called after each batch. On PostgreSQL
        each batch's statements may take at most ``statement_timeout`` seconds (None: no limit).
        Returns how many were deleted."""
        deleted, after = 0, None
        while True:
            with short_transaction(self._write_alias(), statement_timeout):
                ids = self.delete_batch(batch_size, after=after)
            deleted += len(ids)
            if ids:
                after = max(ids)
                if progress is not None:
                    progress(deleted)
            if len(ids) < batch_size:
                return deleted

    def delete_batch(self, limit, *, after=None) -> list:
        """Delete up to ``limit`` of this queryset's jobs, lowest ids first and only ids above
        ``after`` if given, in one statement; returns the deleted ids.

        Walking the ids (``after`` = the highest id deleted so far) keeps each batch's cost flat:
        the rows deleted by earlier batches are behind the walk, not scanned again.
        """
        alias = self._write_alias()
        connection = connections[alias]
        picked = self.order_by("pk")
        if after is not None:
            picked = picked.filter(pk__gt=after)
        picked = picked.values("pk")[:limit]
        picked_sql, picked_params = picked.query.get_compiler(using=alias).as_sql()
        statement, params = ops(connection).delete_jobs(
            self.model, picked_sql=picked_sql, picked_params=picked_params)
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            return [row[0] for row in cursor.fetchall()]

    # ---- stats ---------------------------------------------------------------------------
    def stats(self, now=None) -> dict:
        """``{queue: QueueStats}``: counts per status, and the lag of the oldest ready job
        (observability/queue_stats.py)."""
        return queue_stats(self, now)
