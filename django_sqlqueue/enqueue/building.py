"""Turn ``enqueue(task, args, kwargs, **options)`` into the field values of a new Job row.

Everything a caller can get wrong is checked here, before any SQL runs, so a bad enqueue raises
at the call site and writes nothing.

The checks are split so that an enqueue repeats none it need not. The options that describe every
job of a task (queue, priority, retry policy, ...) become :class:`JobDefaults`, checked once per
task and version of the settings (``Task.job_defaults``); each enqueue then checks only its own
payload and per-call options.
"""

import copy
import dataclasses
import datetime as dt
import functools
import math
from dataclasses import dataclass

from django.utils import timezone

from ..conf import QueueSettings, get_settings
from ..db.instances import new_instance
from ..db.job_table import unique_states_mask
from ..exceptions import InvalidUniqueKey
from ..statuses import KEY_HOLDING_STATUSES, JobStatus
from . import arguments, validation

#: The keyword arguments ``enqueue`` accepts besides the payload and the database alias;
#: ``@job`` and ``Task.using`` take the same names.
ENQUEUE_OPTIONS = frozenset(
    {
        "queue", "priority", "run_at", "delay", "max_attempts", "max_interruptions", "max_age",
        "unique_key",
        "retry_backoff", "retry_min_delay", "retry_max_delay", "retry_jitter", "timeout",
        "transactional", "concurrency_key", "unique_states", "unique_period", "tags", "metadata",
    }
)
#: Options that describe one enqueue, not the task, so ``@job`` refuses them.
PER_CALL_OPTIONS = frozenset({"run_at", "delay", "unique_key"})
#: Options an enqueue may change without the task's other options being checked again.
CHEAP_OPTIONS = PER_CALL_OPTIONS | {
    "concurrency_key", "unique_states", "unique_period", "tags", "metadata",
}
#: The options of JobDefaults that an enqueue may give instead of the task's, and their checks.
_OWN_CHECKS = {
    "unique_states": validation.unique_states, "unique_period": validation.unique_period,
    "tags": validation.tags, "metadata": validation.metadata,
}
_UNFINISHED_MASK = unique_states_mask(KEY_HOLDING_STATUSES)


@dataclass(frozen=True)
class JobDefaults:
    """The checked fields that every job of one task shares, for one version of the settings."""

    settings: QueueSettings  # the settings they were derived from; stale once these change
    fields: dict  # task_name, queue, priority, max_attempts, retry policy, timeout_seconds
    max_age: float | None  # seconds from run_at to expires_at; None: the jobs never expire
    # A unique key's statuses (bits, None: the unfinished ones) and period in seconds (None:
    # none); only jobs given a unique_key have one.
    unique_states: int | None = None
    unique_period: float | None = None
    tags: list | None = None  # copied into each job
    metadata: dict | None = None  # copied into each job


def job_defaults(task_name: str, options: dict, conf: QueueSettings | None = None) -> JobDefaults:
    """Check the task-level enqueue options (per-call ones, like ``run_at``, are not read)."""
    conf = conf or get_settings()

    def option(key, default):
        value = options.get(key)
        return default if value is None else value

    max_age, timeout = options.get("max_age"), options.get("timeout")
    fields = {
        "task_name": task_name,
        "queue": validation.queue_name(option("queue", conf.DEFAULT_QUEUE)),
        "priority": validation.priority(option("priority", 0)),
        "max_attempts": validation.max_attempts(option("max_attempts", conf.MAX_ATTEMPTS)),
        "max_interruptions": validation.max_interruptions(
            option("max_interruptions", conf.MAX_INTERRUPTIONS)),
        **validation.retry_policy(
            backoff=option("retry_backoff", conf.BACKOFF_SECONDS),
            min_delay=option("retry_min_delay", conf.MIN_RETRY_DELAY_SECONDS),
            max_delay=option("retry_max_delay", conf.MAX_RETRY_DELAY_SECONDS),
            jitter=option("retry_jitter", conf.RETRY_JITTER),
        ),
        "timeout_seconds": validation.transactional_timeout(
            option("transactional", False),
            None if timeout is None else validation.seconds(timeout, "timeout", allow_zero=False),
            conf),
        "transactional": option("transactional", False),
        # A task's own key (its jobs share the per-key limits of their queue); an enqueue may
        # give another.
        "concurrency_key": validation.concurrency_key(options.get("concurrency_key")) or "",
    }
    # max_age counts from the moment the job is due, so a job scheduled for tomorrow with
    # max_age=1h may start until one hour after its run_at.
    max_age = None if max_age is None else validation.seconds(max_age, "max_age", allow_zero=False)
    own = {name: check(options.get(name)) for name, check in _OWN_CHECKS.items()}
    return JobDefaults(settings=conf, fields=fields, max_age=max_age, **own)


def prepare_job(model, task, args, kwargs, options=None):
    """An unsaved, complete ``model`` (Job) of ``task``, a registered Task; ``options`` are the
    enqueue options of this call (names already checked), over the task's own."""
    merged = {**task.options, **options} if options else task.options
    if task.is_async:
        validation.not_async_transactional(task.name, task.is_async, merged)
    if not options or CHEAP_OPTIONS.issuperset(options):
        defaults = task.job_defaults()  # checked once per task
    else:  # this call changes some of the task's options: check them together
        defaults = job_defaults(task.name, merged)
    if options:
        own = {name: _OWN_CHECKS[name](options[name]) for name in _OWN_CHECKS.keys() & options}
        if own:  # this call's own tags, metadata or unique key's statuses and period
            if (own.get("unique_states") or own.get("unique_period")) and merged.get(
                    "unique_key") is None:
                raise InvalidUniqueKey("unique_states and unique_period apply to a unique_key: "
                                       "pass unique_key too (e.g. f'sync-{customer.pk}').")
            defaults = dataclasses.replace(defaults, **own)
    fields = new_job_fields(
        defaults, args, kwargs, run_at=merged.get("run_at"), delay=merged.get("delay"),
        unique_key=merged.get("unique_key"),
    )
    arguments.call_arguments(task.name, task.signature(), args or (), kwargs or {})
    if options and "concurrency_key" in options:
        fields["concurrency_key"] = validation.concurrency_key(options["concurrency_key"]) or ""
    return build_job(model, fields)


def new_job_fields(
    defaults: JobDefaults, args, kwargs, *, run_at=None, delay=None, unique_key=None, now=None
) -> dict:
    """Every field value of one new job: ``defaults`` plus this call's payload, time and key."""
    now = now or timezone.now()
    due = validation.run_at(run_at, delay, now)
    fields = {
        **defaults.fields,
        "payload": validation.json_payload(
            args, kwargs, max_bytes=defaults.settings.MAX_PAYLOAD_BYTES
        ),
        "run_at": due,
        "expires_at": None
        if defaults.max_age is None
        else due + dt.timedelta(seconds=defaults.max_age),
        "enqueued_at": now,
        "unique_key": validation.unique_key(unique_key),
        **new_job_state(),
        # The fields that only a claim or an outcome sets have no default: None, filled in by
        # build_job (or Job.__init__).
    }
    if defaults.tags is not None:
        fields["tags"] = list(defaults.tags)
    if defaults.metadata is not None:
        fields["metadata"] = copy.deepcopy(defaults.metadata)
    key = fields["unique_key"]
    if key is not None and (defaults.unique_states or defaults.unique_period):
        # A slot instead of the plain unique key (Job.unique_slot says why).
        fields.update(unique_key=None, unique_slot=unique_slot(key, defaults.unique_period, now),
                      unique_states=defaults.unique_states or _UNFINISHED_MASK)
    return fields


def unique_slot(key: str, period: float | None, now: dt.datetime) -> str:
    """A unique key's slot: the key, and with a period the start of the period ``now`` is in,
    counted from the epoch in UTC (``sync-42@2026-11-26T02:05:00+00:00``): every enqueue of the
    key in that period names the same slot, which one job at a time can hold."""
    if period is None:
        return key
    start = math.floor(now.timestamp() / period) * period
    return f"{key}@{dt.datetime.fromtimestamp(start, dt.timezone.utc).isoformat()}"


def new_job_state() -> dict:
    """The state of a new job, for every route that makes one (``@job``, ``django.tasks``, a
    schedule's tick): the table's database defaults, set here as well so that a prepared Job is
    complete and equal to its row before it is inserted. A new dict each time (``errors`` is a
    list of the job's own)."""
    return {"status": JobStatus.QUEUED, "attempts": 0, "interruptions": 0, "errors": [],
            "parents_pending": 0, "awaited": False}


def job_fields(task_name: str, args, kwargs, *, now=None, **options) -> dict:
    """Validated field values for one job. ``options`` are the keyword arguments of enqueue."""
    return new_job_fields(
        job_defaults(task_name, options), args, kwargs, now=now,
        run_at=options.get("run_at"), delay=options.get("delay"),
        unique_key=options.get("unique_key"),
    )


def build_job(model, fields: dict):
    """``model(**fields)``, faster (see db/instances.py). Fields not given get their default, as
    with keywords."""
    constant, computed = _field_defaults(model)
    # One merge in C rather than a setdefault per field: the fields given win.
    fields = {**constant, **fields}
    for name in computed.keys() - fields.keys():
        fields[name] = computed[name]()
    return new_instance(model, fields)


@functools.cache
def _field_defaults(model) -> tuple:
    """``({attname: value}, {attname: get_default})``: the default of a field with none
    declared (None, or "" for text) is a constant, found once; the others (callables, objects
    that must not be shared between instances) are made per instance."""
    constant, computed = {}, {}
    for field in model._meta.concrete_fields:
        if field.has_default() or field.has_db_default():
            computed[field.attname] = field.get_default
        else:
            constant[field.attname] = field.get_default()
    return constant, computed
