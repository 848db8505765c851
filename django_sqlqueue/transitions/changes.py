"""State changes of jobs besides the outcome of their run: expire (maintenance), rescue (a
worker lost), cancel and retry now (operators). ``JobQuerySet`` hands each here from its method
of the same name (its docstring says what it does), with the queryset, which brings the model;
each ends what it changes in the workflows of those jobs (settle.py) in the same transaction:
so they live beside it."""


from django.db import connections, models, transaction
from django.db.models import Case, Exists, F, Max, OuterRef, Q, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone

from .. import signals
from ..conf import get_settings
from ..db import ops, returning
from ..db.batches import write_lock_first
from ..db.clock import DatabaseNow
from ..db.job_table import SLOT_HELD
from ..enqueue.notify import CANCEL_CHANNEL, sends_notify
from ..statuses import READY_STATUSES, RETRYABLE_STATUSES, JobStatus
from .settle import resume, settle

#: The error type a rescue records: ``run.outcomes.WorkerLost``, named here because outcomes
#: imports this module (a test pins the two together).
WORKER_LOST_TYPE = "django_sqlqueue.run.outcomes.WorkerLost"


def expire(queryset, now=None, *, limit=None) -> int:
    """``JobQuerySet.expire``: ready jobs past their ``expires_at`` become expired, and the
    jobs of their workflows that wait for them are cancelled."""
    at = now or DatabaseNow(in_filter=True)
    due = queryset.in_ready_status().filter(expires_at__lte=at)
    if limit is not None:
        picked = due.order_by().values_list("pk", flat=True)[:limit]
        if not connections[queryset._write_alias()].features.allow_sliced_subqueries_with_in:
            picked = list(picked)  # MariaDB: no LIMIT in an IN subquery
        due = queryset.model.objects.using(queryset._write_alias()).in_ready_status().filter(
            pk__in=picked, expires_at__lte=at
        )
    alias = queryset._write_alias()
    with transaction.atomic(using=alias, savepoint=False):
        write_lock_first(alias, queryset.model)  # it reads before it writes
        # A workflow's jobs that expire cancel the jobs waiting for them (settle).
        in_workflows = list(due.filter(workflow_id__isnull=False)
                            .values_list("pk", flat=True))
        count = due.update(status=JobStatus.EXPIRED, finished_at=now or DatabaseNow())
        if in_workflows:
            settle(queryset.model, alias, dict(queryset.model.objects.using(alias).filter(
                pk__in=in_workflows, status=JobStatus.EXPIRED).values_list("pk", "status")))
    return count


def rescue(queryset, now=None, *, reason="its lease expired", limit=500) -> int:
    """``JobQuerySet.rescue``: running jobs given back as interrupted by the loss of their
    worker (the driver's ``rescue_jobs``), in one fenced UPDATE."""
    alias = queryset._write_alias()
    connection = connections[alias]
    picked = queryset.running().order_by("lease_expires_at", "pk").values(
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
            queryset.model, picked_sql=picked_sql, picked_params=picked_params, now=now,
            error_type=WORKER_LOST_TYPE, reason=reason,
            message_limit=get_settings().MAX_TRACEBACK_CHARS))
        ended = {pk: status for pk, status in rescued if status != JobStatus.QUEUED}
        if ended:  # at max_interruptions: its workflow's waiting jobs are cancelled
            settle(queryset.model, alias, ended)
        if rescued and signals.has_receivers(signals.job_rescued, queryset.model):
            _send_rescued(queryset, [pk for pk, _ in rescued], alias, reason)
    return len(rescued)


def _send_rescued(queryset, pks, alias, reason) -> None:
    """``job_rescued`` for each rescued job, read as written (in the rescue's
    transaction, so as this rescue left it), sent once that transaction commits."""
    jobs = [job for job in queryset.model.objects.using(alias).filter(pk__in=pks).order_by("pk")
            if signals.is_job_function(job)]

    def send():
        for job in jobs:
            signals.send(signals.job_rescued, queryset.model, job=job, reason=reason,
                         will_retry=job.status == JobStatus.QUEUED)

    transaction.on_commit(send, using=alias)


def cancel(queryset, now=None, *, by=None) -> int:
    """``JobQuerySet.cancel``: jobs not started are cancelled, running ones asked to stop,
    in one UPDATE; on PostgreSQL a NOTIFY wakes the workers to learn of it."""
    now = now or timezone.now()
    alias = queryset._write_alias()
    ready = Q(status__in=(*READY_STATUSES, JobStatus.WAITING))
    with transaction.atomic(using=alias, savepoint=False):
        write_lock_first(alias, queryset.model)  # it reads before it writes
        # A workflow's jobs cancelled now cancel the jobs waiting for them (settle).
        in_workflows = list(queryset.filter(ready, workflow_id__isnull=False)
                            .values_list("pk", flat=True))
        changed = _cancel(queryset, ready, now, by)
        if in_workflows:
            settle(queryset.model, alias, dict(
                queryset.model.objects.using(alias).filter(
                    pk__in=in_workflows, status=JobStatus.CANCELLED
                ).values_list("pk", "status")))
    if changed and sends_notify(connections[alias]):
        ops(connections[alias]).notify(CANCEL_CHANNEL, [""])
    return changed


def _cancel(queryset, ready, now, by) -> int:
    """cancel's UPDATE: ``ready`` jobs cancelled now, running ones asked to stop."""
    return queryset.filter(
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


def retry_now(queryset, now=None) -> int:
    """``JobQuerySet.retry_now``: failed, exhausted, cancelled and expired jobs queued again,
    due now, but where another job holds their unique key or slot."""
    now = now or timezone.now()
    jobs = queryset.model.objects.using(queryset.db)
    taken_keys = jobs.unfinished().filter(unique_key__isnull=False).values("unique_key")
    slot_held_by_another = jobs.filter(SLOT_HELD, unique_slot=OuterRef("unique_slot")).exclude(
        pk=OuterRef("pk"))
    retryable = (queryset.filter(status__in=RETRYABLE_STATUSES).exclude(unique_key__in=taken_keys)
                 .exclude(Exists(slot_held_by_another)))
    # Of several selected jobs sharing a unique key (or slot), only the newest can hold it.
    newest_per_key = (
        retryable.filter(unique_key__isnull=False).values("unique_key")
        .annotate(newest=Max("pk")).values("newest")
    )
    newest_per_slot = (
        retryable.filter(unique_slot__isnull=False).values("unique_slot")
        .annotate(newest=Max("pk")).values("newest")
    )
    alias = queryset._write_alias()
    picked = (
        jobs.filter(pk__in=retryable.values("pk"))
        .filter(Q(unique_key__isnull=True) | Q(pk__in=newest_per_key))
        .filter(Q(unique_slot__isnull=True) | Q(pk__in=newest_per_slot))
    )
    with transaction.atomic(using=alias, savepoint=False):
        write_lock_first(alias, queryset.model)  # it reads before it writes
        # A workflow's job queued again takes back the jobs its end had cancelled (resume).
        in_workflows = list(picked.filter(workflow_id__isnull=False)
                            .values_list("pk", flat=True))
        count = picked.update(
            status=JobStatus.QUEUED, run_at=now, finished_at=None, expires_at=None,
            lease_expires_at=None, cancel_requested_at=None, cancelled_by=None,
            max_attempts=Greatest(F("max_attempts"), F("attempts") + 1),
        )
        if in_workflows:
            resume(queryset.model, alias, list(queryset.model.objects.using(alias).filter(
                pk__in=in_workflows, status=JobStatus.QUEUED).values_list("pk", flat=True)))
    return count
