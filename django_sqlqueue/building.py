"""Turn ``enqueue(task, args, kwargs, **options)`` into the field values of a new Job row.

Everything a caller can get wrong is checked here, before any SQL runs, so a bad enqueue raises
at the call site and writes nothing.
"""

import datetime as dt

from django.utils import timezone

from . import validation
from .conf import get_settings


def job_fields(task_name: str, args, kwargs, *, now=None, **options) -> dict:
    """Validated field values for one job. ``options`` are the keyword arguments of enqueue."""
    conf = get_settings()
    now = now or timezone.now()
    run_at = validation.run_at(options.get("run_at"), options.get("delay"), now)
    max_age = options.get("max_age")
    expires_at = None
    if max_age is not None:
        # max_age counts from the moment the job is due, so a job scheduled for tomorrow with
        # max_age=1h may start until one hour after its run_at.
        age = validation.seconds(max_age, "max_age", allow_zero=False)
        expires_at = run_at + dt.timedelta(seconds=age)

    def option(key, default):
        value = options.get(key)
        return default if value is None else value

    return {
        "task_name": task_name,
        "queue": validation.queue_name(option("queue", conf.DEFAULT_QUEUE)),
        "payload": validation.json_payload(args, kwargs, max_bytes=conf.MAX_PAYLOAD_BYTES),
        "priority": validation.priority(option("priority", 0)),
        "max_attempts": validation.max_attempts(option("max_attempts", conf.MAX_ATTEMPTS)),
        **validation.retry_policy(
            backoff=option("retry_backoff", conf.BACKOFF_SECONDS),
            min_delay=option("retry_min_delay", conf.MIN_RETRY_DELAY_SECONDS),
            max_delay=option("retry_max_delay", conf.MAX_RETRY_DELAY_SECONDS),
            jitter=option("retry_jitter", conf.RETRY_JITTER),
        ),
        "run_at": run_at,
        "expires_at": expires_at,
        "enqueued_at": now,
        "unique_key": validation.unique_key(options.get("unique_key")),
        "timeout_seconds": None
        if options.get("timeout") is None
        else validation.seconds(options["timeout"], "timeout", allow_zero=False),
    }


def validate_options(task_name: str, options: dict) -> None:
    """Check a task's default options once, when ``@job`` registers it."""
    job_fields(task_name, (), {}, **options)
