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

A fair queue (``Queue.fair``) with limits is claimed here too, under the same row lock, and
fair.py shares each claim between its keys; one without limits is claimed by fair.py alone,
side by side with the queue's other claims (no turn on its row: nothing to count).

Queues with no pause, no limit and no fair shares are claimed by the plain single statement, as
if this module did not exist; a worker reads the Queue table once per poll interval
(``read_controls``), so a pause, a resume, a new limit or fair shares are in force on every
worker within one poll interval.
"""

import functools
import operator
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from django.db import connections, transaction
from django.db.models import Count, Q

from ..db import ops, returning
from ..statuses import READY_STATUSES, JobStatus
from . import fair, plain
from .rows import converted_rows, in_claim_order, rows_to_models

#: The most keys one claim reads rows of (SQLite allows 500 parts in one UNION ALL). Keys are
#: found in name order, so with more ready keys than this, those later in the order wait until
#: the earlier ones run out of ready jobs or reach their limits.
KEYS_PER_CLAIM = 400


@dataclass(frozen=True)
class QueueControls:
    """What the Queue table said when it was read: the paused, the limited and the fair
    queues."""

    paused: frozenset = frozenset()
    limited: frozenset = frozenset()  # not paused, with at least one limit (fair or not)
    #: The fair queues without limits, not paused: {name: key weights}. Claimed side by side
    #: (claim/fair.py), with no turn on the queue's row.
    fair: Mapping = field(default_factory=dict)
    read_at: float = 0.0  # time.monotonic() of the read
    #: The Queue model it was read from (the caller's: this layer never imports the models),
    #: whose rows the limited claims lock.
    table: type | None = None

    @property
    def unused(self) -> bool:
        """Nothing to enforce: every claim is the plain one."""
        return not self.paused and not self.limited and not self.fair

    def held_back(self) -> frozenset:
        """The queues a plain claim leaves alone."""
        return self.paused | self.limited | frozenset(self.fair)


def read_controls(queue_model, alias) -> QueueControls:
    """The paused, limited and fair queues, from the Queue table (``queue_model``; a few rows:
    one per queue an operator configured)."""
    connection = connections[alias]
    # Its SQL built once: a worker reads it once per poll interval, right after a claim, and
    # the ORM's build of it (0.2-0.3 ms of Python, holding the GIL) delayed the start of the
    # job just claimed, whose thread waited for the GIL (pickup p95).
    sql, params = ops(connection).cached(("queue_controls", queue_model), _controls_query,
                                         queue_model, alias)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = converted_rows(queue_model, alias, cursor.fetchall(), CONTROL_FIELDS)
    paused, limited, fair_queues = set(), set(), {}
    # A queue no longer fair starts level if it becomes fair again.
    fair.forget(alias, keep={name for name, _, is_fair, *_ in rows if is_fair})
    for name, paused_at, is_fair, weights, *limit_values in rows:
        if paused_at is not None:
            paused.add(name)
        elif any(value is not None for value in limit_values):
            limited.add(name)
        elif is_fair:
            fair_queues[name] = weights or {}
    return QueueControls(paused=frozenset(paused), limited=frozenset(limited),
                         fair=MappingProxyType(fair_queues), read_at=time.monotonic(),
                         table=queue_model)


def _controls_query(queue_model, alias) -> tuple:
    """read_controls' SELECT, as (sql, params): the queues with a pause, fair shares or a
    limit."""
    rows = queue_model._default_manager.using(alias).filter(
        Q(paused_at__isnull=False) | Q(fair=True)
        | functools.reduce(operator.or_, (Q(**{f"{limit}__isnull": False}) for limit in LIMITS))
    ).values_list(*CONTROL_FIELDS)
    return rows.query.get_compiler(using=alias).as_sql()


#: The Queue columns of its limits: a queue with any of them set is limited.
LIMITS = ("concurrency_limit", "rate_limit", "key_concurrency_limit", "key_rate_limit")
#: What read_controls reads of each such queue.
CONTROL_FIELDS = ("name", "paused_at", "fair", "key_weights", *LIMITS)


def claim_controlled(queryset, queues, worker_id, limit, lease_seconds, now, controls) -> list:
    """``JobQuerySet.claim`` when some queue is paused, limited or fair: the limited and fair
    queues this worker serves first (each within its limits, each fair), then the others,
    plain."""
    if queryset.query.has_filters():
        # A filtered claim (a test's, an admin's) leaves paused, limited and fair queues alone.
        return plain.claim_ready(queryset.exclude(queue__in=controls.held_back()),
                                 queues, worker_id, limit, lease_seconds, now)
    alias = queryset._write_alias()
    controlled = controls.limited | frozenset(controls.fair)
    served = controlled if queues is None else [q for q in queues if q in controlled]
    jobs = []
    for name in sorted(served):
        if len(jobs) >= limit:
            break
        if name in controls.fair:
            jobs += fair.claim_fair(queryset, name, controls.fair[name], worker_id,
                                    min(limit - len(jobs), KEYS_PER_CLAIM), lease_seconds, now)
        else:
            jobs += claim_limited(queryset, controls.table, name, worker_id, limit - len(jobs),
                                  lease_seconds, now)
    if len(jobs) < limit:
        if queues is None:
            # "Every queue but these": the ready queues' names, found by a skip scan, so that
            # the claim walks each queue's own index range and never reads the held-back
            # backlog (a NOT IN on the any-queue index would read all of it first).
            queues = ready_queues(queryset.model, alias)
        others = [q for q in queues if q not in controls.held_back()]
        if others:
            jobs += plain.claim_ready(queryset, others, worker_id, limit - len(jobs),
                                      lease_seconds, now)
    return jobs


def claim_limited(queryset, queue_model, name, worker_id, limit, lease_seconds,
                  now=None) -> list:
    """Claim up to ``limit`` jobs of the limited queue ``name`` within its limits, in one
    transaction serialised on its row of ``queue_model`` (see the module's docstring)."""
    model = queryset.model
    alias = queryset._write_alias()
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
        if row.fair:
            # At most one slot per key read: each key is one part of claimable_ids_by_key.
            jobs = fair.claim_fair(queryset, name, row.key_weights or {}, worker_id,
                                   min(room, KEYS_PER_CLAIM), lease_seconds, now,
                                   _key_caps(row, room, running, starts))
        else:
            if row.key_concurrency_limit is None and row.key_rate_limit is None:
                picked = _first_ready(model, alias, name, clock, room)
            else:
                picked = _first_ready_by_key(model, alias, row, clock, room, running, starts)
            jobs = []
            if picked:
                ids = model.objects.filter(pk__in=picked, status__in=READY_STATUSES).values("pk")
                picked_sql, picked_params = ids.query.get_compiler(using=alias).as_sql()
                jobs = plain.claim_picked(queryset, picked_sql, picked_params, worker_id,
                                          lease_seconds, clock)
        if row.rate_limit is not None or row.key_rate_limit is not None:
            at = clock.timestamp()
            for job in jobs:
                if row.rate_limit is not None:
                    starts.setdefault("", []).append(at)
                if row.key_rate_limit is not None and job.concurrency_key:
                    starts.setdefault(job.concurrency_key, []).append(at)
            queue_model._default_manager.using(alias).filter(pk=row.pk).update(
                recent_starts=starts)
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
