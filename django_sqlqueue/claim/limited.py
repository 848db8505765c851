"""The claim of paused, limited and fair queues (docs/limits.md, docs/fairness.md), and what
holds a queue's jobs back.

A Queue row (models/queue.py) may pause its queue, or limit its running jobs and its starts per
period, for the whole queue and for each ``concurrency_key`` of its jobs. The claim enforces
every limit itself, atomically, so that no race between workers or hosts can exceed one:

* The claim of a limited queue is one short transaction that first UPDATEs the queue's row.
  On PostgreSQL that is a row lock: the claims of that queue (and only of that queue) take
  turns, and each one, under READ COMMITTED, counts with a snapshot taken after the previous
  claim committed. A plain COUNT in a concurrent claim would not do: two claims under SKIP
  LOCKED would both count 2 running of 3 and both start one. On SQLite the UPDATE takes the
  database's write lock before anything is read, which orders every claim anyway.
* Under that lock it counts the queue's running jobs (per key too), keeps the start times of
  the rate period in the row (``recent_starts``, pruned as they age out: an exact sliding
  window, not a fixed one that lets twice the rate through across a window's edge), picks at
  most what the limits leave, claims those rows with the time it read as ``claimed_at``, and
  writes the new starts, then commits.
* Per-key limits skip keys at their limit without reading their rows: the ready keys are found
  by a skip scan and each key's first rows are read from its own index range
  (the driver's ``ready_keys``, ``ready_ids_by_key``).

A fair queue (``Queue.fair``) is claimed here too, under the same row lock: fair.py shares each
claim between its keys and keeps its bookkeeping in the row.

Queues with no pause, no limit and no fair shares are claimed by the plain single statement, as
if this module did not exist; a worker reads the Queue table once per poll interval
(``read_controls``), so a pause, a resume, a new limit or fair shares are in force on every
worker within one poll interval.
"""

import functools
import time
from dataclasses import dataclass

from django.db import connections, transaction
from django.db.models import Count, Q

from ..db import ops, returning
from ..statuses import READY_STATUSES, JobStatus
from .fair import fair_state, pick_fair
from .rows import in_claim_order, rows_to_models

#: The most keys one claim reads rows of (SQLite allows 500 parts in one UNION ALL). Keys are
#: found in name order, so with more ready keys than this, those later in the order wait until
#: the earlier ones run out of ready jobs or reach their limits.
KEYS_PER_CLAIM = 400


@dataclass(frozen=True)
class QueueControls:
    """What the Queue table said when it was read: the paused and the limited queues."""

    paused: frozenset = frozenset()
    limited: frozenset = frozenset()  # not paused, with at least one limit or fair shares
    read_at: float = 0.0  # time.monotonic() of the read

    @property
    def unused(self) -> bool:
        """Nothing to enforce: every claim is the plain one."""
        return not self.paused and not self.limited

    def held_back(self) -> frozenset:
        return self.paused | self.limited


def read_controls(job_model, alias) -> QueueControls:
    """The paused and limited (or fair) queues, from the Queue table (a few rows: one per queue
    an operator configured)."""
    queue_model = job_model._meta.apps.get_model("django_sqlqueue", "Queue")
    rows = queue_model.objects.using(alias).filter(
        Q(paused_at__isnull=False) | Q(concurrency_limit__isnull=False)
        | Q(rate_limit__isnull=False) | Q(key_concurrency_limit__isnull=False)
        | Q(key_rate_limit__isnull=False) | Q(fair=True)
    ).values_list("name", "paused_at")
    paused = frozenset(name for name, paused_at in rows if paused_at is not None)
    limited = frozenset(name for name, paused_at in rows if paused_at is None)
    return QueueControls(paused=paused, limited=limited, read_at=time.monotonic())


def claim_controlled(queryset, queues, worker_id, limit, lease_seconds, now, controls) -> list:
    """``JobQuerySet.claim`` when some queue is paused or limited: the limited queues this
    worker serves first (each within its limits), then the others, plain."""
    if queryset.query.has_filters():
        # A filtered claim (a test's, an admin's) leaves paused and limited queues alone.
        return queryset.exclude(queue__in=controls.held_back()).claim_ready(
            queues, worker_id, limit, lease_seconds, now)
    alias = queryset._write_alias()
    served = controls.limited if queues is None else [q for q in queues if q in controls.limited]
    jobs = []
    for name in sorted(served):
        if len(jobs) < limit:
            jobs += claim_limited(queryset, name, worker_id, limit - len(jobs), lease_seconds,
                                  now)
    if len(jobs) < limit:
        if queues is None:
            # "Every queue but these": the ready queues' names, found by a skip scan, so that
            # the claim walks each queue's own index range and never reads the held-back
            # backlog (a NOT IN on the any-queue index would read all of it first).
            queues = ready_queues(queryset.model, alias)
        plain = [q for q in queues if q not in controls.held_back()]
        if plain:
            jobs += queryset.claim_ready(plain, worker_id, limit - len(jobs), lease_seconds, now)
    return jobs


def claim_limited(queryset, name, worker_id, limit, lease_seconds, now=None) -> list:
    """Claim up to ``limit`` jobs of the limited queue ``name`` within its limits, in one
    transaction serialised on its Queue row (see the module's docstring)."""
    model = queryset.model
    alias = queryset._write_alias()
    queue_model = model._meta.apps.get_model("django_sqlqueue", "Queue")
    connection = connections[alias]
    fields = _queue_fields(queue_model)
    with transaction.atomic(using=alias):
        # First statement: the row lock (PostgreSQL, MariaDB) or the write lock (SQLite).
        found = returning.fetch(connection, *ops(connection).lock_queue(
            queue_model, name=name, fields=fields))
        if not found:
            return []  # paused, or its row deleted, since the controls were read
        (row,) = rows_to_models(queue_model, alias, found, fields=fields)
        clock = now or row.last_claim_at
        starts = recent_starts(row, clock)
        running = {}
        if row.concurrency_limit is not None or row.key_concurrency_limit is not None:
            running = dict(
                model.objects.using(alias).filter(status=JobStatus.RUNNING, queue=name)
                .values_list("concurrency_key").annotate(n=Count("pk")).order_by())
        room = _room(limit, row.concurrency_limit, sum(running.values()),
                     row.rate_limit, len(starts.get("", ())))
        if room <= 0:
            return []
        fair = None
        if row.fair:
            # At most one slot per key read: each key is one part of ready_ids_by_key.
            room = min(room, KEYS_PER_CLAIM)
            fair = pick_fair(model, alias, row, clock, room, _key_caps(row, room, running,
                                                                         starts))
            picked = fair.ids
        elif row.key_concurrency_limit is None and row.key_rate_limit is None:
            picked = _first_ready(model, alias, name, clock, room)
        else:
            picked = _first_ready_by_key(model, alias, row, clock, room, running, starts)
        jobs = []
        if picked:
            ids = model.objects.filter(pk__in=picked, status__in=READY_STATUSES).values("pk")
            picked_sql, picked_params = ids.query.get_compiler(using=alias).as_sql()
            jobs = queryset.claim_picked(picked_sql, picked_params, worker_id, lease_seconds,
                                         clock)
        written = {}
        if fair is not None and (jobs or fair.after != (row.fair_state or {}).get("after")):
            # Even with no job claimed, the next claim looks at the next keys.
            written["fair_state"] = fair_state(row, jobs, fair.after)
        if row.rate_limit is not None or row.key_rate_limit is not None:
            at = clock.timestamp()
            for job in jobs:
                if row.rate_limit is not None:
                    starts.setdefault("", []).append(at)
                if row.key_rate_limit is not None and job.concurrency_key:
                    starts.setdefault(job.concurrency_key, []).append(at)
            written["recent_starts"] = starts
        if written:
            queue_model.objects.using(alias).filter(pk=row.pk).update(**written)
    return jobs


@functools.cache
def _queue_fields(queue_model) -> tuple:
    return tuple(field.name for field in queue_model._meta.concrete_fields)


def _room(limit, concurrency_limit, running, rate_limit, recent) -> int:
    """How many more may start: ``limit``, less what a concurrency or rate limit forbids."""
    room = limit
    if concurrency_limit is not None:
        room = min(room, concurrency_limit - running)
    if rate_limit is not None:
        room = min(room, rate_limit - recent)
    return room


def _key_caps(row, room, running, starts):
    """A function of a key: how many more of its jobs may start under the per-key limits (the
    jobs without a key, "", have none); None without per-key limits."""
    if row.key_concurrency_limit is None and row.key_rate_limit is None:
        return None
    return lambda key: room if not key else max(0, _room(
        room, row.key_concurrency_limit, running.get(key, 0), row.key_rate_limit,
        len(starts.get(key, ()))))


def recent_starts(row, clock) -> dict:
    """The row's start times still inside the rate period at ``clock``; keys without any are
    dropped (the row stays as small as the starts of one period)."""
    since = clock.timestamp() - row.rate_period_seconds
    recent = {}
    for key, times in (row.recent_starts or {}).items():
        kept = [at for at in times if at > since]
        if kept:
            recent[key] = kept
    return recent


def _first_ready(model, alias, name, clock, room) -> list:
    """The ids of the first ``room`` ready jobs of queue ``name``."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        statement, params = ops(connection).ready_ids(model, queues=[name], limit=room, now=clock)
        cursor.execute(statement, params)
        return [pk for pk, in cursor.fetchall()]


def _first_ready_by_key(model, alias, row, clock, room, running, starts) -> list:
    """The ids of the first ``room`` ready jobs of the queue of ``row`` in claim order, with no
    key taking more than its per-key limits leave it."""
    connection = connections[alias]
    keys = [key for key, in returning.fetch(connection, *ops(connection).ready_keys(
        model, queue=row.name, limit=KEYS_PER_CLAIM))]
    wanted = {"": room}  # the jobs without a key
    for key in keys:
        left = _room(room, row.key_concurrency_limit, running.get(key, 0),
                     row.key_rate_limit, len(starts.get(key, ())))
        if left > 0:
            wanted[key] = left
    db_clock = model._meta.get_field("run_at").get_db_prep_value(clock, connection)
    statement, params = ops(connection).ready_ids_by_key(
        model, queue=row.name, wanted=wanted, now=db_clock)
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        candidates = in_claim_order(model, cursor.fetchall())
    # Each part returned at most its key's room: the first ``room`` in claim order fit.
    return [pk for pk, *_ in candidates[:room]]


def ready_queues(model, alias) -> list:
    """The names of the queues with ready rows (a skip scan of the ready index)."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        statement, params = ops(connection).ready_queues(model, limit=10_000)
        cursor.execute(statement, params)
        return [name for name, in cursor.fetchall()]
