"""Prometheus metrics in one process: the view's gauges read from the database, the enqueue
counter, and the option errors of ``runworker --metrics-port``."""

import datetime as dt
import json
import re
import socket
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.factories import JobFactory, WorkerFactory
from tests.testapp.tasks import add, send_email

pytestmark = pytest.mark.django_db
ADD, EMAIL = "tests.testapp.tasks.add", "tests.testapp.tasks.send_email"


@pytest.fixture
def scrape(client, settings):
    settings.ROOT_URLCONF = "tests.integration.metrics_urls"

    def get() -> dict:
        response = client.get(reverse("django_sqlqueue:metrics"))
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/plain; version=")
        samples = [(sample.name, tuple(sorted(sample.labels.items())), sample.value)
                   for family in text_string_to_metric_families(response.content.decode())
                   for sample in family.samples]
        by_series = {(name, labels): value for name, labels, value in samples}
        assert len(by_series) == len(samples), "a series twice: Prometheus rejects the scrape"
        return by_series

    return get


def labels(**pairs):
    return tuple(sorted(pairs.items()))


def test_the_view_serves_waiting_and_running_jobs_ready_depth_and_lag(scrape):
    now = timezone.now()
    JobFactory.create_batch(3, enqueued_at=now - dt.timedelta(seconds=90))  # due 90 s ago
    JobFactory(scheduled=True)  # due in an hour: waiting, not ready
    JobFactory(failed=True, run_at=now - dt.timedelta(seconds=10))  # its retry is due
    JobFactory(running=True)
    JobFactory.create_batch(5, succeeded=True)  # finished: the workers' counters tell those
    JobFactory(task_name=EMAIL, queue="emails", scheduled=True)
    JobFactory.create_batch(2, status=JobStatus.WAITING)  # a workflow's: not ready, not queued
    samples = scrape()
    assert samples[("sqlqueue_jobs", labels(queue="default", task=ADD, status="queued"))] == 4
    assert samples[("sqlqueue_jobs", labels(queue="default", task=ADD, status="failed"))] == 1
    assert samples[("sqlqueue_jobs", labels(queue="default", task=ADD, status="running"))] == 1
    assert samples[("sqlqueue_jobs", labels(queue="emails", task=EMAIL, status="queued"))] == 1
    assert samples[("sqlqueue_jobs", labels(queue="default", task=ADD, status="waiting"))] == 2
    assert not any(dict(key)["status"] == JobStatus.SUCCEEDED
                   for name, key in samples if name == "sqlqueue_jobs")
    # Ready: the due ones of queued and failed together; the scheduled job is not.
    assert samples[("sqlqueue_jobs_ready", labels(queue="default", task=ADD))] == 4
    assert samples[("sqlqueue_jobs_ready", labels(queue="emails", task=EMAIL))] == 0
    lag = samples[("sqlqueue_jobs_lag_seconds", labels(queue="default", task=ADD))]
    assert 90 <= lag < 90 + 60  # the oldest due job waited 90 s (plus the test's own time)
    assert samples[("sqlqueue_jobs_lag_seconds", labels(queue="emails", task=EMAIL))] == 0


def test_the_view_counts_live_workers_per_queue(scrape):
    JobFactory(task_name=EMAIL, queue="emails")
    JobFactory(queue="reports")
    WorkerFactory(queues=[], concurrency=4)  # serves every queue
    WorkerFactory(queues=["emails"], concurrency=2)
    WorkerFactory(queues=["emails"], concurrency=8, lease_seconds=30,  # silent: not live
                  last_heartbeat_at=timezone.now() - dt.timedelta(seconds=31))
    WorkerFactory(queues=["pdf"], concurrency=1, lease_seconds=30)
    samples = scrape()
    assert samples[("sqlqueue_live_workers", ())] == 3
    assert samples[("sqlqueue_queue_live_workers", labels(queue="emails"))] == 2
    assert samples[("sqlqueue_queue_live_worker_slots", labels(queue="emails"))] == 6
    assert samples[("sqlqueue_queue_live_workers", labels(queue="reports"))] == 1
    assert samples[("sqlqueue_queue_live_workers", labels(queue="pdf"))] == 2


def test_the_view_says_no_live_worker_serves_a_queue(scrape):
    JobFactory(queue="reports")
    WorkerFactory(queues=["emails"])
    samples = scrape()
    assert samples[("sqlqueue_queue_live_workers", labels(queue="reports"))] == 0
    assert samples[("sqlqueue_jobs_ready", labels(queue="reports", task=ADD))] == 1


def test_the_view_answers_get_only(client, settings):
    settings.ROOT_URLCONF = "tests.integration.metrics_urls"
    assert client.post(reverse("django_sqlqueue:metrics")).status_code == 405


def enqueued(queue, task) -> float:
    return REGISTRY.get_sample_value("sqlqueue_jobs_enqueued_total",
                                     {"queue": queue, "task": task}) or 0.0


@pytest.mark.django_db(transaction=True)
def test_enqueues_are_counted_when_they_commit_and_never_after_a_rollback():
    before_add, before_email = enqueued("default", ADD), enqueued("emails", EMAIL)
    with transaction.atomic():
        add.enqueue(1, 2)
        send_email.enqueue("a@example.com")
        assert enqueued("default", ADD) == before_add  # not committed yet
    assert enqueued("default", ADD) == before_add + 1
    assert enqueued("emails", EMAIL) == before_email + 1
    with pytest.raises(RuntimeError), transaction.atomic():
        add.enqueue(1, 2)
        raise RuntimeError("roll back")
    assert enqueued("default", ADD) == before_add + 1
    Job.objects.bulk_enqueue(add.prepare(n, 1) for n in range(3))
    assert enqueued("default", ADD) == before_add + 4
    add.enqueue_many((n, 1) for n in range(5))
    assert enqueued("default", ADD) == before_add + 9
    with pytest.raises(RuntimeError), transaction.atomic():
        add.enqueue_many((n, 1) for n in range(5))
        raise RuntimeError("roll back")
    assert enqueued("default", ADD) == before_add + 9


def test_a_metrics_port_out_of_range_is_refused():
    with pytest.raises(CommandError, match="--metrics-port must be from 0 to 65535, not 70000"):
        call_command("runworker", "--metrics-port", "70000")


def test_a_metrics_port_in_use_is_refused_before_the_worker_starts():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CommandError, match=f"--metrics-port {port}: cannot listen on "
                                               f"127.0.0.1:{port} .*pick a free port"):
            call_command("runworker", "--metrics-port", str(port), "--metrics-address",
                         "127.0.0.1")


def test_the_dashboard_and_the_alert_rules_use_only_metrics_that_exist():
    """docs/grafana/django-sqlqueue.json and the PromQL of docs/observability.md name only
    series that the worker's endpoint or the view export (a rename would leave them blank)."""
    from django_sqlqueue.observability.queue_metrics import QueueMetricsCollector
    from django_sqlqueue.telemetry import metrics

    assert metrics.recording()
    exported = set()
    for family in [*REGISTRY.collect(), *QueueMetricsCollector("default").collect()]:
        exported.add(family.name)
        exported.update(sample.name for sample in family.samples)
        if family.type == "counter":
            exported.add(family.name + "_total")
        if family.type == "histogram":
            exported.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
    docs = Path(__file__).resolve().parents[2] / "docs"
    dashboard = json.loads((docs / "grafana" / "django-sqlqueue.json").read_text())
    expressions = [target["expr"] for panel in dashboard["panels"]
                   for target in panel.get("targets", [])]
    expressions += [var["query"]["query"] for var in dashboard["templating"]["list"]
                    if isinstance(var.get("query"), dict)]
    page = (docs / "observability.md").read_text()
    section = page.split("## Prometheus metrics", 1)[1].split("\n## ", 1)[0]
    expressions += re.findall(r"```yaml\n(.*?)```", section, re.S)
    named = {name for text in expressions for name in re.findall(r"\bsqlqueue_[a-z_]+", text)}
    assert len(expressions) > 15 and len(named) > 10
    assert named <= exported, f"not exported: {sorted(named - exported)}"
    # Every metric exported is documented in the page's tables.
    documented = set(re.findall(r"^\| `(sqlqueue_[a-z_]+)", section, re.M))
    families = {name for name in exported if name.startswith("sqlqueue_")
                and not name.endswith(("_bucket", "_sum", "_count", "_created"))
                and name + "_total" not in exported}
    assert len(families) == 19, sorted(families)  # 10 of the workers', 9 of the view
    assert families <= documented, f"not in the tables: {sorted(families - documented)}"
