"""The workers page, the queue dashboard and its chart, and the links to them."""

import datetime as dt
import re
import time
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.admin.chart import nice_ceiling, throughput_svg
from django_sqlqueue.admin.dashboard import QUEUE_COLUMNS, Column, build
from django_sqlqueue.models import Worker
from tests.admin.users import make_staff
from tests.factories import JobFactory, WorkerFactory

pytestmark = pytest.mark.django_db
WORKERS = reverse("admin:django_sqlqueue_worker_changelist")
DASHBOARD = reverse("admin:django_sqlqueue_job_dashboard")
DASHBOARD_DATA = reverse("admin:django_sqlqueue_job_dashboard_data")
LIST = reverse("admin:django_sqlqueue_job_changelist")


def ago(**kwargs):
    return timezone.now() - dt.timedelta(**kwargs)


# ---- workers ---------------------------------------------------------------------------------
def test_workers_page_shows_liveness_and_running_jobs(admin_client, settings):
    settings.SQLQUEUE = {**settings.SQLQUEUE, "LEASE_SECONDS": 30}
    alive = WorkerFactory(queues=["emails"], concurrency=2)
    WorkerFactory(last_heartbeat_at=ago(seconds=45))
    WorkerFactory(last_heartbeat_at=ago(minutes=5))
    running = JobFactory(running=True, claimed_by=alive.name, task_name="shop.tasks.send")
    JobFactory(succeeded=True, claimed_by=alive.name)  # finished: not "running now"
    html = unescape(admin_client.get(WORKERS).content.decode())
    assert ">alive</span>" in html and ">late</span>" in html and ">presumed dead</span>" in html
    assert "1 of 2" in html
    assert f"#{running.pk}</a> shop.tasks.send" in html
    assert "emails" in html and "all queues" in html
    assert f"status__exact=running&claimed_by={alive.name}".replace(":", "%3A") in html


def test_workers_page_shows_each_workers_code_version(admin_client):
    """SQLQUEUE["VERSION"], which readiness compares across a host's workers (docs/operations.md):
    a rolling deploy shows as two versions side by side."""
    WorkerFactory(version="2026.11.3")
    WorkerFactory(version="2026.11.4")
    html = admin_client.get(WORKERS).content.decode()
    assert "2026.11.3" in html and "2026.11.4" in html


def test_workers_page_reads_running_jobs_in_one_query(admin_client):
    def page_queries():
        with CaptureQueriesContext(connection) as queries:
            admin_client.get(WORKERS)
        return len(queries)

    for _ in range(2):
        worker = WorkerFactory()
        JobFactory(running=True, claimed_by=worker.name)
    few = page_queries()
    for _ in range(8):
        worker = WorkerFactory()
        JobFactory.create_batch(2, running=True, claimed_by=worker.name)
    assert page_queries() == few


def test_a_worker_filter_from_the_job_list(admin_client):
    one, _other = WorkerFactory(), WorkerFactory()
    response = admin_client.get(WORKERS, {"name": one.name})
    assert [w.pk for w in response.context["cl"].result_list] == [one.pk]


def test_worker_page_is_read_only(admin_client):
    worker = WorkerFactory()
    JobFactory(running=True, claimed_by=worker.name)
    change = reverse("admin:django_sqlqueue_worker_change", args=[worker.pk])
    response = admin_client.get(change)
    assert response.status_code == 200 and "1 of 4" in response.content.decode()
    assert admin_client.post(change, {"name": "x"}).status_code == 403
    assert admin_client.get(reverse("admin:django_sqlqueue_worker_add")).status_code == 403
    delete = reverse("admin:django_sqlqueue_worker_delete", args=[worker.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert Worker.objects.filter(pk=worker.pk).exists()


def test_workers_page_needs_the_view_permission(client):
    client.force_login(make_staff("jobs-only", "view_job"))
    assert client.get(WORKERS).status_code == 403


# ---- dashboard --------------------------------------------------------------------------------
@pytest.fixture
def busy_queues():
    now = timezone.now()
    WorkerFactory(queues=["default"])
    JobFactory.create_batch(3, queue="default", run_at=now - dt.timedelta(minutes=2))
    JobFactory(queue="default", running=True)
    JobFactory(queue="reports", run_at=now - dt.timedelta(minutes=20))  # nobody serves it
    for minutes in (1, 1, 5, 30):
        JobFactory(queue="default", succeeded=True, finished_at=now - dt.timedelta(minutes=minutes))
    JobFactory(queue="default", exhausted=True, finished_at=now - dt.timedelta(minutes=5))
    JobFactory(queue="default", succeeded=True, finished_at=now - dt.timedelta(hours=3))
    return now


def test_dashboard_data(busy_queues):
    JobFactory(queue="default", run_at=busy_queues + dt.timedelta(hours=1))  # scheduled
    data = build(LIST, now=busy_queues)
    cards = {card.name: card for card in data["cards"]}
    assert [card.name for card in data["cards"]] == ["reports", "default"]  # trouble first
    default, reports = cards["default"], cards["reports"]
    assert {k: v for k, v in default.counts.items() if v} == {
        "queued": 3, "scheduled": 1, "running": 1, "succeeded": 5, "exhausted": 1}
    assert default.queue.live_workers == 1 and not default.queue.unserved
    assert 110 < default.queue.lag_seconds < 130 and default.lag_level == "warn"
    assert reports.queue.live_workers == 0 and reports.queue.unserved
    assert data["unserved"] == ["reports"]
    # An autoscaler's view (docs/autoscaling.md): 5 jobs on 4-slot processes want 2, and so
    # does the oldest due job waiting past the target (one more than the 1 live).
    assert (data["desired_processes"], data["busy_percent"]) == (2, 25)
    assert data["windows"] == {"1h": {"done": 5, "failed": 1}, "24h": {"done": 6, "failed": 1},
                               "7d": {"done": 6, "failed": 1}}
    assert data["workers_live"] == 1 and data["scheduled"] == 1 and data["queued"] == 4


def test_lag_is_red_when_no_live_worker_serves_a_due_queue(busy_queues):
    """Even a short lag: nothing will run those jobs."""
    JobFactory(queue="emails", run_at=busy_queues - dt.timedelta(seconds=5))
    data = build(LIST, now=busy_queues)
    emails = next(card for card in data["cards"] if card.name == "emails")
    assert emails.queue.lag_seconds < 60 and emails.lag_level == "alert"
    row = next(cells for card, cells in data["rows"] if card is emails)
    lag = next(level for column, _, level in row if column.heading == "Lag")
    assert lag == "alert"
    assert data["max_lag_level"] == "alert"


def test_the_queue_table_takes_a_new_column_in_one_line(admin_client, busy_queues, monkeypatch):
    monkeypatch.setattr("django_sqlqueue.admin.dashboard.QUEUE_COLUMNS",
                        [*QUEUE_COLUMNS, Column("Paused", lambda card: "no")])
    html = admin_client.get(DASHBOARD).content.decode()
    assert '<th scope="col">Paused</th>' in html and "<td>no</td>" in html


def test_dashboard_page(admin_client, busy_queues):
    response = admin_client.get(DASHBOARD)
    html = unescape(response.content.decode())
    assert response.status_code == 200
    assert "Queue dashboard" in html
    assert 'Jobs are due in queue “reports” and no live worker takes that queue' in html
    assert html.count('<svg class="sq-chart"') == 3  # all queues, default, reports
    assert "succeeded: 4" in html and "failed (ended exhausted): 1" in html
    assert 'data-sq="scheduled">0<' in html and 'data-sq="done-7d">6<' in html
    assert 'data-sq="desired-processes">2<' in html and "25% of slots busy" in html
    assert f"{LIST}?status__exact=queued&due=later&queue=default" in html  # scheduled
    assert 'class="sq-alert">0</td>' in html  # reports: no live worker
    assert "−60 min" in html and "now</text>" in html and "jobs per minute" in html
    assert f"{LIST}?status__exact=exhausted&queue=default" in html
    assert "ended <em>exhausted</em>" in html  # what "failed" means is said on the page


def test_dashboard_with_no_jobs(admin_client):
    html = admin_client.get(DASHBOARD).content.decode()
    assert "No jobs yet." in html


def test_dashboard_query_count(admin_client, busy_queues, django_assert_max_num_queries,
                               monkeypatch):
    # session, user; ready, running, the row estimate (PostgreSQL), finished, the rollup's
    # cursor, its hours and minutes (once it has run), the jobs since, workers, the Queue
    # rows (pauses and limits); cancelling (only while jobs run); the autoscalers' last changes
    # (a table of a few rows per supervisor)
    monkeypatch.setattr("django_sqlqueue.observability.table_health._tiles", {})
    # ...and the tables' health for its tile, once a minute: three or four catalog reads.
    with django_assert_max_num_queries(14 + 4):
        admin_client.get(DASHBOARD)
    with django_assert_max_num_queries(14):
        admin_client.get(DASHBOARD)


def test_the_data_endpoint_answers_json_with_the_page_part(admin_client, busy_queues):
    response = admin_client.get(DASHBOARD_DATA)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "no-store" in response["Cache-Control"]  # admin_view's never_cache
    data = response.json()
    assert [queue["name"] for queue in data["snapshot"]["queues"]] == ["default", "reports"]
    assert data["snapshot"]["queues"][0]["counts"]["running"] == 1
    assert 'id="sq-queues"' in data["html"] and "<html" not in data["html"]
    # The time as the page writes it ({{ now|time:"H:i:s" }}): the script shows it as is.
    assert re.fullmatch(r"\d\d:\d\d:\d\d", data["updated"])


def test_the_page_loads_its_refresh_script(admin_client, busy_queues):
    html = admin_client.get(DASHBOARD).content.decode()
    assert 'src="/static/django_sqlqueue/dashboard.js"' in html
    assert f'data-refresh-url="{DASHBOARD_DATA}"' in html


@pytest.mark.parametrize("url", [DASHBOARD, DASHBOARD_DATA])
def test_dashboard_needs_the_view_permission(client, url):
    client.force_login(make_staff("workers-only", "view_worker"))
    assert client.get(url).status_code == 403
    anonymous = client.__class__()
    assert anonymous.get(url).status_code == 302


def test_a_silent_worker_is_reported(admin_client, settings):
    settings.SQLQUEUE = {**settings.SQLQUEUE, "LEASE_SECONDS": 30}
    WorkerFactory(last_heartbeat_at=ago(minutes=10))
    JobFactory()
    html = admin_client.get(DASHBOARD).content.decode()
    assert "1 worker stopped sending heartbeats" in html


def test_chart_scale_and_escaping():
    assert [nice_ceiling(n) for n in (0, 1, 3, 7, 12, 21, 51, 180, 201)] == [
        1, 1, 5, 10, 20, 25, 100, 200, 250]
    buckets = [[0, 0]] * 59 + [[7, 2]]
    svg = str(throughput_svg(buckets, timezone.now(), label='queue "<x>"'))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "&lt;x&gt;" in svg and '"<x>"' not in svg
    assert ">10</text>" in svg  # the scale: 7 rounds up to 10
    assert svg.count('fill="#2e9d4a"') == 2  # the legend and one bar


# ---- links from the admin index ------------------------------------------------------------
def test_admin_index_lists_jobs_and_workers(admin_client):
    html = admin_client.get(reverse("admin:index")).content.decode()
    assert LIST in html and WORKERS in html
    assert reverse("admin:app_list", args=["django_sqlqueue"]) in html


def test_admin_index_links_the_dashboard_for_those_who_may_view_jobs(client):
    row = reverse("admin:django_sqlqueue_queuedashboard_changelist")
    client.force_login(make_staff("viewer", "view_job"))
    assert row in client.get(reverse("admin:index")).content.decode()
    response = client.get(row)
    assert response.status_code == 302 and response["Location"] == DASHBOARD
    client.force_login(make_staff("workers-only", "view_worker"))
    assert row not in client.get(reverse("admin:index")).content.decode()


def test_app_page_links_the_dashboard(admin_client):
    html = admin_client.get(reverse("admin:app_list", args=["django_sqlqueue"])).content.decode()
    assert DASHBOARD in html and "Queue dashboard" in html
    assert f"{LIST}?status__exact=exhausted" in html


def test_lists_link_the_dashboard(admin_client):
    assert DASHBOARD in admin_client.get(LIST).content.decode()
    assert DASHBOARD in admin_client.get(WORKERS).content.decode()


@pytest.mark.postgresql
def test_estimated_counts_are_labelled(admin_client, busy_queues, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite counts exactly")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_sqlqueue_job")
    monkeypatch.setattr("django_sqlqueue.observability.snapshot.EXACT_LIMIT", 1)
    monkeypatch.setattr("django_sqlqueue.observability.snapshot.SAMPLE_ROWS", 10_000)
    html = unescape(admin_client.get(DASHBOARD).content.decode())
    assert "the counts of jobs queued, scheduled, failed, succeeded, exhausted, cancelled, " \
           "expired are estimates from a sample of the table" in html
    assert "the lag is that of the oldest due job in the sample: at least that" in html


@pytest.mark.django_db(transaction=True)
def test_the_dashboard_tile_gives_the_job_tables_size_and_what_to_do(admin_client, monkeypatch):
    """The tile reads ``manage.py tablehealth``'s report (at most once a minute); with advice,
    it says how many things there are to do and names the command."""
    from django_sqlqueue.observability import table_health

    monkeypatch.setattr(table_health, "_tiles", {})
    html = unescape(admin_client.get(DASHBOARD).content.decode())
    tile = re.search(r'id="sq-table-health".*?</div></div>', html, re.S).group(0)
    assert "nothing to do" in tile and '<div class="sq-cap">job table</div>' in tile
    report = table_health.read("default")
    report.advice = ["VACUUM (ANALYZE) django_sqlqueue_job."]  # as a busy table would have
    monkeypatch.setattr(table_health, "_tiles", {"default": (time.monotonic(), report)})
    html = unescape(admin_client.get(DASHBOARD).content.decode())
    tile = re.search(r'id="sq-table-health".*?</div></div>', html, re.S).group(0)
    assert "1 thing to do: <code>manage.py tablehealth</code>" in tile
    assert 'title="VACUUM (ANALYZE) django_sqlqueue_job."' in tile
