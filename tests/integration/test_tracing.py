"""OpenTelemetry: the enqueue's PRODUCER span, the run's CONSUMER span linked to it through the
job row, with the messaging conventions' attributes; checked with the SDK's in-memory exporter.
Without the API, or without a tracer provider, nothing is traced and nothing is written."""

import subprocess
import sys

import pytest
from django.db import connection

from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.telemetry import tracing
from tests.conftest import ROOT
from tests.support.claims import claim_one
from tests.testapp.tasks import add, always_fails

trace = pytest.importorskip("opentelemetry.trace")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def spans(monkeypatch):
    """An SDK tracer provider of this test's own (the global one can be set only once per
    process, and would trace every other test), its spans kept in memory."""
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_tracer", lambda: provider.get_tracer("test"))
    exporter.provider = provider
    yield exporter
    provider.shutdown()


def only(exporter, name):
    (span,) = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


def test_the_run_links_to_the_enqueue_of_the_request(spans):
    with spans.provider.get_tracer("web").start_as_current_span("GET /signup") as request:
        job = add.enqueue(2, 3)
    send = only(spans, "send default")
    assert send.kind == trace.SpanKind.PRODUCER
    assert send.parent.span_id == request.get_span_context().span_id  # inside the request
    assert dict(send.attributes) == {
        "messaging.system": "django_sqlqueue", "messaging.operation.type": "send",
        "messaging.operation.name": "send", "messaging.destination.name": "default",
        "messaging.message.id": str(job.pk),
    }
    stored = Job.objects.get(pk=job.pk).trace_context
    assert stored["traceparent"].split("-")[2] == format(send.context.span_id, "016x")

    run_job(claim_one("worker-1", job=job))
    process = only(spans, "process default")
    assert process.kind == trace.SpanKind.CONSUMER
    assert process.parent is None  # a trace of its own...
    (link,) = process.links  # ...linked to the enqueue
    assert (link.context.trace_id, link.context.span_id) == (send.context.trace_id,
                                                             send.context.span_id)
    assert process.context.trace_id != send.context.trace_id
    assert dict(process.attributes) == {
        "messaging.system": "django_sqlqueue", "messaging.operation.type": "process",
        "messaging.operation.name": "process", "messaging.destination.name": "default",
        "messaging.message.id": str(job.pk), "messaging.client.id": "worker-1",
        "messaging.django_sqlqueue.task": "tests.testapp.tasks.add",
        "messaging.django_sqlqueue.attempt": 1,
        "messaging.django_sqlqueue.outcome": "succeeded",
    }
    assert process.status.status_code == trace.StatusCode.UNSET


def test_a_failed_run_records_the_exception(spans):
    job = always_fails.enqueue("boom")
    run_job(claim_one("worker-1", job=job))
    process = only(spans, "process default")
    assert process.status.status_code == trace.StatusCode.ERROR
    assert process.attributes["error.type"] == "builtins.RuntimeError"
    assert process.attributes["messaging.django_sqlqueue.outcome"] == "failed"
    (event,) = process.events
    assert event.name == "exception" and event.attributes["exception.message"] == "boom"


def test_the_function_runs_inside_the_run_span(spans, monkeypatch):
    seen = []
    monkeypatch.setattr(add, "func", lambda a, b: seen.append(trace.get_current_span()))
    run_job(claim_one("worker-1", job=add.enqueue(1, 1)))
    (current,) = seen
    assert current.get_span_context().span_id == only(spans, "process default").context.span_id


@pytest.mark.parametrize("bulk", [
    lambda: [job.pk for job in Job.objects.bulk_enqueue(add.prepare(n, n) for n in range(3))],
    lambda: add.enqueue_many((n, n) for n in range(3)),
], ids=["bulk_enqueue", "enqueue_many"])
def test_a_bulk_enqueue_is_one_span_and_every_row_carries_it(spans, bulk):
    ids = bulk()
    send = only(spans, "send default")
    assert send.attributes["messaging.batch.message_count"] == 3
    assert "messaging.message.id" not in send.attributes  # one id per message: none for a batch
    contexts = {str(j.trace_context) for j in Job.objects.filter(pk__in=ids)}
    assert len(contexts) == 1 and format(send.context.span_id, "016x") in contexts.pop()


def test_a_row_inserted_without_a_trace_context_runs_unlinked(spans):
    table = connection.ops.quote_name(Job._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} (task_name, queue, payload) "  # noqa: S608
                       "VALUES (%s, %s, %s)", ["tests.testapp.tasks.add", "default",
                                               '{"args": [1, 2]}'])
    job = Job.objects.get()
    assert job.trace_context is None
    assert run_job(claim_one("worker-1", job=job)).outcome == "succeeded"
    assert only(spans, "process default").links == ()


def test_nothing_is_traced_or_written_without_a_tracer_provider():
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # none set here
    job = add.enqueue(1, 2)
    assert Job.objects.get(pk=job.pk).trace_context is None
    assert tracing.run_span(job) is tracing.OFF


def test_without_the_api_nothing_is_imported():
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"  # as if not installed
        "import django; django.setup()\n"
        "from django_sqlqueue.telemetry import tracing\n"
        "from django_sqlqueue.models import Job\n"
        "jobs = [Job(task_name='t', queue='default')]\n"
        "assert tracing.enqueue_span(jobs) is tracing.OFF\n"
        "assert tracing.run_span(jobs[0]) is tracing.OFF\n"
        "assert jobs[0].trace_context is None\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry.')]\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": "/usr/bin"},
                          timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
