"""The plain claim: ready jobs of queues that no pause or limit holds back, picked in claim order
and set running in one statement (the driver's ``ready_ids``/``ready_ids_after`` and
``claim_jobs``), returned as jobs. ``JobQuerySet.claim`` decides which claim runs; the limited
and fair ones (``limited.py``, ``fair.py``) call this one for the rows they pick. The claim runs
a few hundred times a second per worker: its SQL text is built once per shape."""

import datetime as dt
import functools
import uuid

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..db import ops, returning
from ..db.job_table import CLAIM_ORDER, PROGRESS_COLUMNS
from ..statuses import JobStatus
from .rows import rows_to_models

#: The cancel columns of every job a claim returns.
NOT_CANCELLED = {"cancel_requested_at": None, "cancelled_by": None}


def claim_ready(queryset, queues, worker_id, limit, lease_seconds, now=None, *,
                after=None) -> list:
    """The claim of queues that no pause or limit holds back (``claim`` checked the
    arguments): one statement; with ``after``, of the jobs after that position only."""
    alias = queryset._write_alias()
    if queryset.query.has_filters():  # e.g. Job.objects.filter(task_name=...).claim()
        picked = (
            queryset.using(alias).ready(now).in_queues(queues).order_by(*CLAIM_ORDER)
            .select_for_update(skip_locked=True).values("pk")[:limit]
        )
        # Django compiles FOR UPDATE only inside a transaction (TransactionManagementError
        # outside one, on PostgreSQL and MariaDB): the claim is one, as it commits on its own.
        with transaction.atomic(using=alias):
            picked_sql, picked_params = picked.query.get_compiler(using=alias).as_sql()
            return claim_picked(queryset, picked_sql, picked_params, worker_id, lease_seconds,
                                now)
    if after is None:
        picked_sql, picked_params = ops(connections[alias]).ready_ids(
            queryset.model, queues=queues, limit=limit, now=now)
    else:
        picked_sql, picked_params = ops(connections[alias]).ready_ids_after(
            queryset.model, after=after, queues=queues, limit=limit, now=now)
    # The same few texts, hundreds of times a second: prepared where the driver can.
    return claim_picked(queryset, picked_sql, picked_params, worker_id, lease_seconds, now,
                        repeated=True)


def claim_picked(queryset, picked_sql, picked_params, worker_id, lease_seconds,
                 now=None, *, repeated: bool = False) -> list:
    """Set the rows whose ids ``picked_sql`` selects running for ``worker_id``, in one
    statement (the driver's ``claim_jobs``), and return them as jobs in claim order.
    ``repeated``: a statement of the few the worker runs again and again (``returning.fetch``);
    not the picks of limited and fair queues, whose texts vary with their keys."""
    alias = queryset._write_alias()
    connection = connections[alias]
    # Without ``now``, claim times and leases come from the database's clock when the row is
    # taken: not from this host's clock, read before a lock wait (``claim_jobs``).
    at = {} if now is None else {"claimed_at": now,
                                 "lease_expires_at": now + dt.timedelta(seconds=lease_seconds)}
    set_values = {
        "status": JobStatus.RUNNING,
        "claimed_by": worker_id[:255],
        "claim_token": uuid.uuid4(),
        **at,
    }
    # The claim knows what it set: the rows bring back only the other columns (each loaded
    # column costs the driver and the ORM's converters time, a claim loads dozens of rows).
    # The lease is the claim time plus the lease, computed here rather than read back.
    # A ready row never has a cancel request (cancel() sets one only on running jobs, and
    # retry_now clears it): known to be empty, not read back.
    returned = _returned_fields(queryset.model, (*set_values, *NOT_CANCELLED, "claimed_at",
                                             "lease_expires_at"))
    rows = returning.fetch(connection, *ops(connection).claim_jobs(
        queryset.model, picked_sql=picked_sql, picked_params=picked_params, values=set_values,
        returning=returned, lease_seconds=lease_seconds if now is None else None),
        repeated=repeated)
    set_values["status"] = JobStatus.RUNNING.value  # as read from the database: a plain str
    if now is None and rows:
        # Every row ends with the claim time, as text: parsed once for the whole claim.
        claimed_at = parse_datetime(rows[0][-1])
        if settings.USE_TZ and timezone.is_naive(claimed_at):  # SQLite's text is UTC
            claimed_at = claimed_at.replace(tzinfo=dt.timezone.utc)
        elif not settings.USE_TZ and timezone.is_aware(claimed_at):  # as the ORM reads it
            claimed_at = timezone.make_naive(claimed_at)
        set_values["claimed_at"] = claimed_at
        set_values["lease_expires_at"] = claimed_at + dt.timedelta(seconds=lease_seconds)
        rows = [row[:-1] for row in rows]
    jobs = rows_to_models(queryset.model, alias, rows, fields=returned,
                          known={**set_values, **NOT_CANCELLED})
    jobs.sort(key=lambda job: (-job.priority, job.run_at, job.pk))
    return jobs


@functools.lru_cache(maxsize=16)
def _returned_fields(model, set_fields) -> tuple:
    # Nor the progress columns, which a job writes and rarely reads: the claim statement stays
    # what it was before them; on the claimed job they are deferred (loaded when read).
    return tuple(f.name for f in model._meta.concrete_fields
                 if f.name not in set_fields and f.name not in PROGRESS_COLUMNS)
