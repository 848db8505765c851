"""What operators do to queues: pause, resume, set limits and fair shares (code, the admin,
``manage.py queues``), and what they see: each queue's state and what its waiting jobs wait for.

Everything is stored in the Queue table, the one source every worker on every host reads
(claim/limited.py enforces it in the claim). A pause stops new claims within one poll interval;
running jobs finish, and enqueueing goes on.
"""

from dataclasses import dataclass, field

from django.db import router, transaction
from django.db.models import Count
from django.utils import timezone

from ..claim.limited import ready_queues, recent_starts
from ..db.batches import write_lock_first
from ..enqueue.validation import queue_name
from ..exceptions import InvalidQueueLimit
from ..models import Job, Queue
from ..models.queue import check_key_weights

#: The limits ``set_limits`` takes, as Queue fields.
LIMIT_FIELDS = ("concurrency_limit", "rate_limit", "rate_period_seconds",
                "key_concurrency_limit", "key_rate_limit")


def _alias(using):
    return using or router.db_for_write(Queue)


def _locked_row(alias, name) -> Queue:
    """Queue ``name``'s row, made if missing, locked until the caller's transaction ends. The
    write lock is taken first: the row is read before it is written, which in SQLite's deferred
    transactions would fail at once while a worker writes (``write_lock_first``)."""
    write_lock_first(alias, Queue)
    row, _ = Queue.objects.using(alias).select_for_update().get_or_create(name=queue_name(name))
    return row


def pause(name: str, *, by: str = "", using=None) -> Queue:
    """Stop every worker from claiming jobs of queue ``name`` (within one poll interval).
    Running jobs finish; jobs can still be enqueued. Pausing a paused queue keeps who paused it
    first and when."""
    alias = _alias(using)
    with transaction.atomic(using=alias):
        row = _locked_row(alias, name)
        if row.paused_at is None:
            row.paused_at, row.paused_by = timezone.now(), by[:150]
            row.save(update_fields=["paused_at", "paused_by", "updated_at"])
    return row


def resume(name: str, *, using=None) -> Queue | None:
    """Let workers claim from queue ``name`` again; None when it has no row (never paused)."""
    row = Queue.objects.using(_alias(using)).filter(name=queue_name(name)).first()
    if row is not None and row.paused_at is not None:
        row.paused_at, row.paused_by = None, ""
        row.save(update_fields=["paused_at", "paused_by", "updated_at"])
    return row


def set_limits(name: str, *, using=None, **limits) -> Queue:
    """Set some limits of queue ``name`` (None removes one); the others stay as they are.

    ``concurrency_limit``: running jobs of the queue at once, across every worker and host.
    ``rate_limit`` per ``rate_period_seconds``: starts of the queue per period.
    ``key_concurrency_limit`` and ``key_rate_limit``: the same for each ``concurrency_key``.
    ``set_limits("emails", concurrency_limit=5, rate_limit=100, rate_period_seconds=60)``.
    """
    unknown = sorted(set(limits) - set(LIMIT_FIELDS))
    if unknown:
        raise TypeError(f"set_limits() got unknown limit(s) {', '.join(unknown)}; valid limits "
                        f"are {', '.join(LIMIT_FIELDS)}.")
    for key, value in limits.items():
        _check_limit(key, value)
    alias = _alias(using)
    with transaction.atomic(using=alias):
        row = _locked_row(alias, name)
        for key, value in limits.items():
            setattr(row, key, value)
        row.save()
    return row


def set_fair(name: str, fair: bool = True, *, weights=None, using=None) -> Queue:
    """Share the claims of queue ``name`` fairly between the concurrency keys of its ready jobs
    (docs/fairness.md), or stop (``fair=False``). ``weights``: {key: a number above 0}, each
    key's share relative to the others' ("" is the jobs without a key; a key not named weighs
    1); None keeps the weights set before, ``{}`` removes them.
    ``set_fair("reports", weights={"big-customer": 1, "": 2})``."""
    if not isinstance(fair, bool):
        raise InvalidQueueLimit(f"fair is True or False, not {fair!r}.")
    weights = None if weights is None else check_key_weights(weights)
    alias = _alias(using)
    with transaction.atomic(using=alias):
        row = _locked_row(alias, name)
        row.fair = fair
        if weights is not None:
            row.key_weights = weights
        row.save()
    return row


def _check_limit(key, value):
    if key == "rate_period_seconds":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise InvalidQueueLimit(
                f"rate_period_seconds must be a number of seconds above 0, not {value!r}.")
    elif value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                or value < 0):
        raise InvalidQueueLimit(
            f"{key} must be a whole number of 0 or more (0 holds every job back), or None for "
            f"no limit, not {value!r}.")


@dataclass
class QueueState:
    """One queue as the admin and ``manage.py queues`` show it."""

    name: str
    paused: bool = False
    paused_by: str = ""
    limits: str = "none"
    running: int = 0
    ready: int = 0
    #: What the ready jobs wait for: "paused", "concurrency limit (3 running)", "rate limit
    #: (10 starts in 1 s)", and the keys at their limits, {key: reason}.
    waiting_on: list = field(default_factory=list)
    keys_at_limit: dict = field(default_factory=dict)


def states(*, using=None, now=None, running=None, ready=None) -> list:
    """The state of every queue that has ready or running jobs or a Queue row. ``running`` and
    ``ready`` ({queue: count}), when the caller has counted them already, save two queries."""
    alias = _alias(using)
    now = now or timezone.now()
    jobs = Job.objects.using(alias)
    if running is None:
        running = dict(jobs.running().values_list("queue").annotate(n=Count("pk")).order_by())
    if ready is None:
        ready = dict(jobs.ready(now).values_list("queue").annotate(n=Count("pk")).order_by())
    rows = {row.name: row for row in Queue.objects.using(alias)}
    result = []
    for name in sorted(set(running) | set(ready) | set(rows)):
        state = QueueState(name, running=running.get(name, 0), ready=ready.get(name, 0))
        row = rows.get(name)
        if row is not None:
            _describe(state, row, jobs, now)
        result.append(state)
    return result


def known_names(*, using=None) -> set:
    """The names of the queues this database knows of: with ready jobs (one probe of the ready
    index per queue, however many jobs each holds) or a Queue row. What an unknown
    ``runworker --queue`` is compared with."""
    alias = _alias(using)
    return set(ready_queues(Job, alias)) | set(
        Queue.objects.using(alias).values_list("name", flat=True))


def _describe(state, row, jobs, now):
    state.paused, state.paused_by = row.is_paused, row.paused_by
    state.limits = row.describe_limits()
    if row.is_paused:
        state.waiting_on.append("paused")
    starts = recent_starts(row, now)
    if row.concurrency_limit is not None and state.running >= row.concurrency_limit:
        state.waiting_on.append(f"concurrency limit ({state.running} running)")
    if row.rate_limit is not None and len(starts.get("", ())) >= row.rate_limit:
        state.waiting_on.append(
            f"rate limit ({row.rate_limit} starts in {row.rate_period_seconds:g} s)")
    if row.key_concurrency_limit is not None:
        per_key = (jobs.running().filter(queue=row.name).exclude(concurrency_key="")
                   .values_list("concurrency_key").annotate(n=Count("pk")).order_by())
        for key, count in per_key:
            if count >= row.key_concurrency_limit:
                state.keys_at_limit[key] = f"concurrency limit ({count} running)"
    if row.key_rate_limit is not None:
        for key, times in starts.items():
            if key and len(times) >= row.key_rate_limit:
                state.keys_at_limit.setdefault(
                    key, f"rate limit ({len(times)} starts in {row.rate_period_seconds:g} s)")
    if state.keys_at_limit:
        waiting_keys = set(
            jobs.in_ready_status().filter(queue=row.name,
                        concurrency_key__in=list(state.keys_at_limit))
            .values_list("concurrency_key", flat=True).distinct())
        state.keys_at_limit = {key: reason for key, reason in state.keys_at_limit.items()
                               if key in waiting_keys}


__all__ = ["pause", "resume", "set_limits", "set_fair", "states", "QueueState"]
