"""What the worker's heartbeats and maintenance change in the job table, as JobQuerySet methods:
expire the jobs past their expiry, renew leases, rescue the jobs of lost workers, delete finished
jobs in short batches. Each is one statement, or one per batch, fenced so that a race with a
worker or another maintainer changes nothing twice."""

import datetime as dt

from django.db import connections, transaction

from .. import signals
from ..conf import get_settings
from ..db import ops, returning
from ..db.batches import short_transaction, write_lock_first
from ..db.clock import DatabaseNow
from ..statuses import JobStatus
from ..workflows.settle import settle
from .dependency import JobDependency
from .step import JobStep

#: The error type a rescue records: ``run.outcomes.WorkerLost``, named here so this module does not
#: import outcomes (a test pins the two together).
WORKER_LOST_TYPE = "django_sqlqueue.run.outcomes.WorkerLost"


class JobMaintenance:
    """Mixed into ``JobQuerySet``: ``self`` is a queryset of jobs."""

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
        alias = self._write_alias()
        with transaction.atomic(using=alias, savepoint=False):
            write_lock_first(alias, self.model)  # it reads before it writes
            # A workflow's jobs that expire cancel the jobs waiting for them (settle).
            in_workflows = list(due.filter(workflow_id__isnull=False)
                                .values_list("pk", flat=True))
            count = due.update(status=JobStatus.EXPIRED, finished_at=now or DatabaseNow())
            if in_workflows:
                settle(self.model, alias, dict(self.model.objects.using(alias).filter(
                    pk__in=in_workflows, status=JobStatus.EXPIRED).values_list("pk", "status")))
        return count

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
            ended = {pk: status for pk, status in rescued if status != JobStatus.QUEUED}
            if ended:  # at max_interruptions: its workflow's waiting jobs are cancelled
                settle(self.model, alias, ended)
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
        rows for long (``delete_batch``: with their steps and the edges whose child it deleted);
        ``progress(deleted_so_far)``
        is called after each batch. On PostgreSQL each batch's statements may take at most
        ``statement_timeout`` seconds (None: no limit). Returns how many were deleted."""
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
        ``after`` if given, in one statement (and their steps and workflow edges in two more);
        returns the deleted ids. Call it inside a transaction (``short_transaction``), as the
        cleaner does.

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
            ids = [row[0] for row in cursor.fetchall()]
        if ids:  # in the caller's transaction: their durable steps (one DELETE by the steps'
            # unique index, which the job leads) and the workflow edges of the jobs deleted as
            # children (their parents may be gone already; one DELETE by the edges' index on
            # the child). Here, not in delete_in_batches, so that the worker's cleaner, which
            # calls this, leaves no edge behind either.
            JobStep.objects.using(alias).filter(job_id__in=ids).delete()
            JobDependency.objects.using(alias).filter(child_id__in=ids).delete()
        return ids
