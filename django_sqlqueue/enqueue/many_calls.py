"""Many calls of one task, enqueued at once: ``task.enqueue_many(calls)`` and
``Job.objects.enqueue_many(task, calls)``.

Every job of such a call shares everything but its arguments: the task, its options, the time.
So one job is prepared and checked as ``enqueue()`` would (the template), each call's arguments
are checked on their own (plain JSON, the size limit, the function's signature), and the insert
sends the template's values once and only the payloads per job, in the JSON document of
``inserting.py``. No Job object is made per call: with ``bulk_enqueue``, the Job objects that
the caller's list keeps alive cost more than their insert (their making, and the garbage
collector's passes over them), and ``enqueue_many`` returns the new jobs' ids instead.

Where a Job per call is needed after all, the calls take ``bulk_enqueue``'s way, with the same
result: a database that cannot insert from a document (SQLite), receivers of ``job_enqueued``
(each is sent its job), or a single call.
"""

import functools

from django.db import connections, transaction
from django.utils import timezone

from .. import signals
from ..db import ops
from ..exceptions import InvalidPayload, InvalidUniqueKey
from ..telemetry import metrics, tracing
from . import arguments, building, inserting, notify, validation


def enqueue_calls(model, task, calls, alias: str, options: dict | None = None, *,
                  batch_size: int = 1000) -> list:
    """Insert one job of ``task`` (a registered Task) per call of ``calls`` on ``alias``, with
    ``options`` (enqueue's, names checked) for all of them; returns their ids in order. A call
    is a tuple (or list) of positional arguments, or a dict of keyword arguments. Every call is
    checked before anything is inserted; the batches of one call are all or nothing."""
    calls = [_arguments(call, index) for index, call in enumerate(calls)]
    if not calls:
        return []
    template = building.prepare_job(model, task, *calls[0], options)
    if template.unique_key is not None or template.unique_slot is not None:
        raise InvalidUniqueKey(
            f"enqueue_many() cannot deduplicate unique_key "
            f"{template.unique_key or template.unique_slot!r}: enqueue unique jobs one at a "
            "time with enqueue().")
    signature, max_bytes = task.signature(), task.job_defaults().settings.MAX_PAYLOAD_BYTES
    payloads = []
    for args, kwargs in calls[1:]:
        payloads.append(validation.json_payload(args, kwargs, max_bytes=max_bytes))
        arguments.call_arguments(task.name, signature, args, kwargs)
    connection = connections[alias]
    driver = ops(connection)

    def one_job_each() -> list:
        jobs = [template, *(building.prepare_job(model, task, args, kwargs, options)
                            for args, kwargs in calls[1:])]
        return [job.pk for job in inserting.bulk_enqueue(model, jobs, alias,
                                                         batch_size=batch_size)]

    if (len(calls) == 1 or not driver.inserts_from_document
            or signals.has_receivers(signals.job_enqueued, model)):
        return one_job_each()
    payloads.insert(0, template.payload)
    now = timezone.now()
    if template.run_at == template.enqueued_at:  # due when prepared: due from now, as bulk
        template.run_at = now
    template.enqueued_at = now
    channel = None
    if driver.supports_notify and notify.should_notify(connection, {template.queue}):
        channel = notify.CHANNEL
    every_job = [template] * len(payloads)  # what the span and the counters read of each job
    with tracing.enqueue_span(every_job):  # its context goes into the template's columns
        statement = inserting.template_insert(connection, template, ("payload",),
                                              notify_channel=channel)
        if statement is not None:
            batches = [[(payload,) for payload in payloads[start:start + batch_size]]
                       for start in range(0, len(payloads), batch_size)]
            inserted = inserting.execute_batches(alias, batches, statement_of=statement)
    if statement is None:  # a column the template leaves to its database default
        return one_job_each()
    notify.wake_in_process_after_commit(alias)
    if metrics.recording():
        transaction.on_commit(functools.partial(metrics.jobs_enqueued, every_job), using=alias)
    return [row[0] for _, rows in inserted for row in rows]


def _arguments(call, index: int) -> tuple:
    """``(args, kwargs)`` of one call of ``enqueue_many``."""
    if isinstance(call, (tuple, list)):
        return call, {}
    if isinstance(call, dict):
        return (), call
    raise InvalidPayload(
        f"enqueue_many() takes one tuple of positional arguments or one dict of keyword "
        f"arguments per job, not {type(call).__name__} (call {index}): for a function of one "
        f"argument, write ({call!r},).")
