"""What the worker's heartbeats and maintenance change in the job table, as JobQuerySet methods:
expire the jobs past their expiry, renew leases, rescue the jobs of lost workers, delete finished
jobs in short batches. Each is one statement, or one per batch, fenced so that a race with a
worker or another maintainer changes nothing twice."""

import datetime as dt

from django.db import connections

from ..conf import get_settings
from ..db import ops
from ..db.batches import short_transaction
from ..db.clock import DatabaseNow
from ..db.pieces import running_by_id
from ..transitions import changes
from .dependency import JobDependency
from .step import JobStep

#: The rows that go with a job that ``delete_batch`` deletes: (model, its foreign key's name).
DEPENDENTS = ((JobStep, "job"), (JobDependency, "child"))


class JobMaintenance:
    """Mixed into ``JobQuerySet``: ``self`` is a queryset of jobs."""

    def expire(self, now=None, *, limit=None) -> int:
        """Mark ready jobs past their expires_at as expired, so they never run; returns how many.
        With ``limit``, at most that many (one batch of the expirer). "Now" is the database's
        clock unless ``now`` is given."""
        return changes.expire(self, now, limit=limit)

    def extend_leases(self, worker_id, job_ids, *, lease=None, now=None) -> int:
        """Renew the leases of ``worker_id``'s running jobs among ``job_ids`` (a heartbeat)."""
        if not job_ids:
            return 0
        seconds = get_settings().LEASE_SECONDS if lease is None else lease
        # By the database's clock, like the claim's lease, unless ``now`` is given.
        expires_at = (DatabaseNow(seconds) if now is None
                      else now + dt.timedelta(seconds=seconds))
        return self.filter(pk__in=list(job_ids), claimed_by=worker_id,
                           status=running_by_id()).update(lease_expires_at=expires_at)

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
        return changes.rescue(self, now, reason=reason, limit=limit)

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
        # With the jobs go their durable steps (found by the steps' unique index, which the job
        # leads) and the workflow edges of the jobs deleted as children (their parents may be
        # gone already; the edges' index on the child). Here, not in delete_in_batches, so that
        # the worker's cleaner, which calls this, leaves no edge behind either.
        statement, params, left = ops(connection).delete_jobs(
            self.model, picked_sql=picked_sql, picked_params=picked_params,
            dependents=DEPENDENTS)
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            ids = [row[0] for row in cursor.fetchall()]
        if ids:  # in the caller's transaction: the dependents the statement did not delete
            for model, name in left:
                model.objects.using(alias).filter(**{f"{name}__in": ids}).delete()
        return ids
