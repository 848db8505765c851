"""OpenTelemetry spans of enqueues and runs, and the trace context a job row carries between them.

Only with ``opentelemetry-api`` installed (the ``[opentelemetry]`` extra) and a tracer provider
set (an SDK configured): otherwise :func:`enqueue_span` and :func:`run_span` return one shared
``nullcontext``, nothing is written to the row, and without the API nothing is even imported.
The API is imported at the first enqueue or run, not when this module is, so that projects
without it pay nothing.

* An enqueue is a PRODUCER span ``send <queue>``, current while the rows are inserted; the
  context of the span (as the project's propagators write it, W3C ``traceparent`` by default)
  goes into each job's ``trace_context`` column, unless the job already has one.
* A run is a CONSUMER span ``process <queue>``, current while the function runs (the spans the
  job makes are its children), which *links* to the enqueue's span. A link, not a parent: a job
  may run hours later, several times, on another host; each attempt is a trace of its own, and
  the link leads back to the request that enqueued it (as the messaging conventions advise).

Attributes follow the OpenTelemetry messaging semantic conventions: ``messaging.system``,
``messaging.operation.type`` / ``.name``, ``messaging.destination.name`` (the queue),
``messaging.message.id`` (the job's id), ``messaging.batch.message_count`` (a bulk enqueue),
``messaging.client.id`` (the worker); this system's own under ``messaging.django_sqlqueue.*``
(the task, the attempt, the outcome); ``error.type`` when an attempt fails.
"""

import functools
from contextlib import contextmanager, nullcontext

SYSTEM = "django_sqlqueue"  # messaging.system: not one of the conventions' well-known values
OFF = nullcontext()


@functools.cache
def _api():
    """The OpenTelemetry API modules (trace, propagate), or None if not installed."""
    try:
        from opentelemetry import propagate, trace
    except ImportError:
        return None
    return trace, propagate


def _tracer():
    """This package's tracer, or None while no tracer provider is set (the API's default
    no-op provider: spans would record nothing, so none are made)."""
    api = _api()
    if api is None:
        return None
    trace = api[0]
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return _tracer_of(provider)


@functools.lru_cache(maxsize=4)
def _tracer_of(provider):
    from .. import __version__

    return provider.get_tracer("django_sqlqueue", __version__)


def enqueue_span(jobs: list):
    """The span of inserting ``jobs`` (unsaved); puts its context in their ``trace_context``.
    Use as ``with enqueue_span(jobs) as span:``, then :func:`enqueued` once they have ids."""
    tracer = _tracer()
    if tracer is None:
        return OFF
    return _enqueue_span(tracer, jobs)


@contextmanager
def _enqueue_span(tracer, jobs):
    trace, propagate = _api()
    queues = {job.queue for job in jobs}
    queue = queues.pop() if len(queues) == 1 else None
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
    }
    if queue is not None:
        attributes["messaging.destination.name"] = queue
    if len(jobs) > 1:
        attributes["messaging.batch.message_count"] = len(jobs)
    with tracer.start_as_current_span(f"send {queue or 'jobs'}", kind=trace.SpanKind.PRODUCER,
                                      attributes=attributes) as span:
        carrier = {}
        propagate.inject(carrier)  # the current context: this span's
        for job in jobs:
            if job.trace_context is None:  # e.g. a job prepared in another request: keep it
                job.trace_context = carrier
        yield span


def enqueued(span, jobs: list) -> None:
    """Record what the insert gave the jobs (their ids) on the enqueue's span."""
    if span is not None and len(jobs) == 1:
        span.set_attribute("messaging.message.id", str(jobs[0].pk))


def run_span(job):
    """The span of one attempt of ``job`` (claimed), current while its function runs.
    ``with run_span(job) as span:``, then :func:`ran` with the outcome."""
    tracer = _tracer()
    if tracer is None:
        return OFF
    trace, propagate = _api()
    links = []
    if job.trace_context:
        try:
            enqueued_in = trace.get_current_span(propagate.extract(job.trace_context))
            if enqueued_in.get_span_context().is_valid:
                links.append(trace.Link(enqueued_in.get_span_context()))
        except Exception:  # noqa: S110 - a row written by hand: no link, but the job runs
            pass
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": str(job.pk),
        "messaging.django_sqlqueue.task": job.task_name,
        "messaging.django_sqlqueue.attempt": job.attempts,
    }
    if job.claimed_by:
        attributes["messaging.client.id"] = job.claimed_by
    # The runner records exceptions itself (ran): it catches them, none escape this span.
    return tracer.start_as_current_span(
        f"process {job.queue}", kind=trace.SpanKind.CONSUMER, links=links,
        attributes=attributes, record_exception=False, set_status_on_exception=False,
    )


def ran(span, outcome) -> None:
    """Record an attempt's outcome (``runner.Outcome``) on its span."""
    if span is None:
        return
    kind = str(outcome.kind)
    span.set_attribute("messaging.django_sqlqueue.outcome", kind)
    error = outcome.error
    if error is not None and kind in ("failed", "aborted"):
        trace = _api()[0]
        span.set_attribute("error.type", f"{type(error).__module__}.{type(error).__qualname__}")
        span.record_exception(error)
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(error) or type(error).__name__))
