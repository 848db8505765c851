"""The dashboard, ``manage.py stats`` and the metrics view read from a replica
(``SQLQUEUE["READ_DATABASE"]``) while workers write to the primary, and say how current the
replica is. The replica is a real streaming standby (tests/postgres_pair.py), which refuses every
write: reading there proves these pages write nothing. The workers run with the same setting and
drain their jobs, so the claim and the outcomes went to the primary."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connections
from django.test import RequestFactory, override_settings
from django.urls import reverse

from django_sqlqueue import views
from django_sqlqueue.models import Job, Worker
from django_sqlqueue.observability import snapshot
from django_sqlqueue.observability.replica import replica_state
from tests.postgres_pair import Pair
from tests.process.conftest import start_worker  # noqa: F401 - the fixture, used here
from tests.support.waiting import wait_until
from tests.testapp.jobs import work

ROOT = Path(__file__).resolve().parents[2]
NAME = "sqlqueue_replica_reads"
PRIMARY, REPLICA = "queue_primary", "replica"
pytestmark = [pytest.mark.postgresql,
              pytest.mark.django_db(transaction=True, databases=["default", PRIMARY, REPLICA])]

JOBS = 200
# Workers beat every LEASE_SECONDS / 3: the primary commits at least every second.
WORKER_SETTINGS = {"LEASE_SECONDS": 3, "POLL_INTERVAL_SECONDS": 0.3, "READ_DATABASE": REPLICA}


@pytest.fixture(scope="module")
def pair(pg_cluster):
    if pg_cluster is None or pg_cluster.pgbouncer is not None:
        pytest.skip("runs in the postgresql pass, on a primary and standby of its own")
    pair = Pair(synchronous=False).start()
    try:
        pair.create_database(NAME)
        yield pair
    finally:
        pair.destroy()


@pytest.fixture(scope="module")
def on_pair(pair):
    """The primary as "queue_primary" and the standby as "replica" in this process; the
    environment that makes the primary "default" (and the standby "replica") in subprocesses.

    Module-scoped, so that both aliases exist when the test case starts: Django 6.1 refuses
    connections to aliases a test did not declare. Each says it mirrors "default" (TEST MIRROR),
    which only keeps the test case from flushing them at its end: the standby refuses writes,
    and the pair goes away with the module anyway."""
    primary = pair.server_database(pair.primary, NAME)
    replica = pair.server_database(pair.standby, NAME)
    env = {"SQLQUEUE_TEST_DATABASES_JSON": json.dumps({"default": primary, REPLICA: replica})}
    migrate = subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--noinput", "-v", "0"], cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **env},
        capture_output=True, text=True, timeout=120,
    )
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    for alias, entry in ((PRIMARY, primary), (REPLICA, replica)):
        # (connections.settings is settings.DATABASES: `stats --database` finds them there.)
        connections.settings[alias] = connections.configure_settings(
            {"default": {**entry, "TEST": {"MIRROR": "default"}}})["default"]
    yield env
    for alias in (PRIMARY, REPLICA):
        connections[alias].close()
        del connections[alias]
        del connections.settings[alias]


def _stats(*args) -> str:
    out = io.StringIO()
    call_command("stats", *args, stdout=out)
    return out.getvalue()


def _replica_age() -> float:
    return replica_state(REPLICA).age_seconds


def test_dashboard_stats_and_metrics_read_from_a_replica(pair, on_pair, start_worker,  # noqa: F811
                                                         admin_client):
    with connections[REPLICA].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery()")
        assert cursor.fetchone()[0], "the replica should be a standby"
    Job.objects.bulk_enqueue((work.prepare(key=str(n)) for n in range(JOBS)), using=PRIMARY)
    workers = [start_worker("-c", "2", "--queue", "default", settings=WORKER_SETTINGS,
                            env=on_pair) for _ in range(2)]
    # The replica follows: every job done, both workers alive, as the primary has it.
    wait_until(lambda: (snap := snapshot.take(alias=REPLICA)).queues
               and snap.queues[0].counts["succeeded"] == JOBS and len(snap.live_workers) == 2,
               what="the replica to show every job done", worker=workers, timeout=60)
    assert Job.objects.using(PRIMARY).filter(status="succeeded").count() == JOBS

    with override_settings(SQLQUEUE={**settings.SQLQUEUE, "READ_DATABASE": REPLICA}):
        page = admin_client.get(reverse("admin:django_sqlqueue_job_dashboard"))
        assert page.status_code == 200
        html = page.content.decode()
        assert 'id="sq-replica"' in html and "Read from “replica”, a replica:" in html
        data = admin_client.get(reverse("admin:django_sqlqueue_job_dashboard_data")).json()
        assert data["snapshot"]["database"] == REPLICA
        assert data["snapshot"]["replica"]["age_seconds"] is not None
        assert data["snapshot"]["queues"][0]["counts"]["succeeded"] == JOBS

        document = json.loads(_stats("--json"))
        assert document["database"] == REPLICA and document["replica"]["replayed_at"]
        assert "read from 'replica', a replica: its last change replayed was committed" in (
            _stats())

        metrics = views.metrics(RequestFactory().get("/metrics")).content.decode()
        assert "sqlqueue_replica_age_seconds" in metrics and "sqlqueue_live_workers 2.0" in (
            metrics)

        # The replica falls behind (its primary's WAL sender held still, as over a broken
        # link) while the workers go on beating on the primary: the staleness shown grows.
        beats = dict(Worker.objects.using(PRIMARY).values_list("name", "last_heartbeat_at"))
        pair.stall_replication()
        try:
            wait_until(lambda: all(
                Worker.objects.using(PRIMARY).get(name=name).last_heartbeat_at > at
                for name, at in beats.items()), what="new heartbeats on the primary",
                worker=workers)
            age = wait_until(lambda: (age := _replica_age()) >= 1.5 and age,
                             what="the replica's age to show the stall")
            document = json.loads(_stats("--json"))
            assert document["replica"]["age_seconds"] >= age
            assert "Read from “replica”" in admin_client.get(
                reverse("admin:django_sqlqueue_job_dashboard")).content.decode()
        finally:
            pair.resume_replication()
        wait_until(lambda: _replica_age() < 1.5, what="the replica to catch up")
    for worker in workers:
        assert worker.is_running(), worker.output
