"""OpenTelemetry across processes: a job enqueued under a request's span here is run by a real
``runworker`` whose SDK (set up globally, as a project does) exports its spans to a file; the
run's CONSUMER span links to the enqueue's PRODUCER span through the job row."""

import json
import signal

import pytest

from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.telemetry import tracing
from tests.process.conftest import job_status
from tests.support.waiting import wait_until
from tests.testapp.tasks import add

trace = pytest.importorskip("opentelemetry.trace")
from tests.support.otel_export import FileExporter  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)
FAST = {"LEASE_SECONDS": 3, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.2}


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_workers_run_span_links_to_the_enqueue(start_worker, tmp_path, monkeypatch):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    here = tmp_path / "web.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(here)))
    monkeypatch.setattr(tracing, "_tracer", lambda: provider.get_tracer("test"))
    with provider.get_tracer("web").start_as_current_span("POST /orders"):
        job = add.enqueue(20, 22)
    (send,) = [s for s in read(here) if s["kind"] == "PRODUCER"]

    exported = tmp_path / "worker.jsonl"
    worker = start_worker(settings=FAST, env={"SQLQUEUE_TEST_OTEL_FILE": str(exported)})
    wait_until(lambda: job_status(job.pk) == JobStatus.SUCCEEDED, what="the run", worker=worker)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output
    (process,) = [s for s in read(exported) if s["name"] == "process default"]
    assert process["kind"] == "CONSUMER" and process["links"] == [send["span_id"]]
    assert process["attributes"]["messaging.message.id"] == str(job.pk)
    assert process["attributes"]["messaging.client.id"].startswith("w0:")
