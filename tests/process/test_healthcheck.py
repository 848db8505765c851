"""``manage.py healthcheck live|ready`` and the health views against real workers and databases:
a worker's liveness fresh, stale (stopped by SIGSTOP) and gone; readiness with the database away
and with a migration unapplied (docs/operations.md, "Health probes")."""

import json
import os
import signal
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from django_sqlqueue.models import Worker
from tests.process.conftest import ROOT, worker_registered
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
FAST = {"LEASE_SECONDS": 2, "MAINTENANCE_INTERVAL_SECONDS": 60}


def probe_command(*args, database_url):
    """Run ``manage.py healthcheck ARGS --json`` as a probe does: (exit code, its JSON)."""
    done = subprocess.run(
        [sys.executable, "-m", "django", "healthcheck", *args, "--json"], cwd=ROOT,
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
             "DATABASE_URL": database_url})
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def probe(*args):
    """The same in this process: (exit code, its JSON)."""
    from io import StringIO

    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("healthcheck", *args, "--json", stdout=out)
    return exited.value.code, json.loads(out.getvalue())


def unreachable_url():
    """A DATABASE_URL of this suite's engine that no server answers at."""
    if connection.vendor == "sqlite":
        return "sqlite:////nonexistent-directory/jobs.sqlite3"
    scheme = "mysql" if connection.vendor == "mysql" else "postgres"
    return f"{scheme}://nobody@127.0.0.1:1/jobs"  # port 1: refused at once


def test_live_while_the_worker_beats_then_not_once_it_stops_beating(start_worker, db_url):
    worker = start_worker(name="probed", settings=FAST)
    wait_until(lambda: worker_registered(worker), what="the worker to register", worker=worker)
    code, answer = probe_command("live", "--name", "probed", database_url=db_url())
    assert (code, answer["status"]) == (0, "healthy"), answer
    assert [w["pid"] for w in answer["workers"]] == [worker.pid]
    assert probe("live")[0] == 0  # every worker of this host: the same one
    worker.signal(signal.SIGSTOP)  # alive, but its heartbeat thread stopped with it
    try:
        code, answer = wait_until(lambda: (result := probe("live", "--name", "probed"))[0] == 1
                                  and result, what="the probe to see a stale heartbeat",
                                  worker=worker)
        assert answer["status"] == "unhealthy" and "more than its lease of 2s" in (
            answer["problems"][0]), answer
    finally:
        worker.signal(signal.SIGCONT)
    wait_until(lambda: probe("live", "--name", "probed")[0] == 0, what="a fresh beat again",
               worker=worker)
    worker.signal(signal.SIGKILL)
    worker.wait()
    # Its row stays until maintenance reaps it, but its pid is gone: nothing of it runs here.
    assert Worker.objects.filter(pid=worker.pid).exists()
    code, answer = probe("live", "--name", "probed")
    assert (code, answer["problems"]) == (1, ["no running worker of name 'probed' is registered"])


def test_not_ready_while_the_database_does_not_answer(db_url):
    assert probe_command("ready", database_url=db_url()) == (
        0, {"probe": "ready", "status": "healthy", "problems": [], "workers": []})
    code, answer = probe_command("ready", database_url=unreachable_url())
    assert (code, answer["status"]) == (1, "unhealthy"), answer
    assert answer["problems"][0].startswith("the jobs database 'default' does not answer")
    # Liveness cannot be judged then, and a restart would not help: unknown, exit code 0.
    code, answer = probe_command("live", database_url=unreachable_url())
    assert (code, answer["status"]) == (0, "unknown"), answer


def test_not_ready_while_a_migration_is_not_applied(client, settings):
    settings.ROOT_URLCONF = "tests.testapp.web"
    recorder = MigrationRecorder(connection)
    latest = max(name for app, name in recorder.applied_migrations()
                 if app == "django_sqlqueue")
    assert probe("ready")[0] == 0
    assert client.get("/sqlqueue/health/ready").status_code == 200
    recorder.record_unapplied("django_sqlqueue", latest)
    try:
        code, answer = probe("ready")
        response = client.get("/sqlqueue/health/ready")
    finally:
        recorder.record_applied("django_sqlqueue", latest)
    assert code == 1 and f"({latest})" in answer["problems"][0], answer
    assert "run `python manage.py migrate` first" in answer["problems"][0]
    assert (response.status_code, response.json()["status"]) == (503, "unhealthy")


def test_the_live_view_judges_this_hosts_workers(client, settings, start_worker):
    settings.ROOT_URLCONF = "tests.testapp.web"
    response = client.get("/sqlqueue/health/live")
    assert response.status_code == 503  # no worker here
    assert response["Cache-Control"].startswith("max-age=0")
    worker = start_worker(settings=FAST)
    wait_until(lambda: worker_registered(worker), what="the worker to register", worker=worker)
    response = client.get("/sqlqueue/health/live")
    assert (response.status_code, response.json()["status"]) == (200, "healthy")


def test_not_ready_while_a_worker_runs_another_version_than_the_code_deployed(start_worker,
                                                                              settings):
    worker = start_worker(name="versioned", settings={**FAST, "VERSION": "2026.11.1"})
    row = wait_until(lambda: Worker.objects.filter(pid=worker.pid).first(),
                     what="the worker to register", worker=worker)
    assert row.version == "2026.11.1"
    settings.SQLQUEUE = {**settings.SQLQUEUE, "VERSION": "2026.11.1"}
    assert probe("ready", "--name", "versioned") == (
        0, {"probe": "ready", "status": "healthy", "problems": [], "workers": []})
    # The code on disk moved on; the worker has not been restarted.
    settings.SQLQUEUE = {**settings.SQLQUEUE, "VERSION": "2026.11.2"}
    code, answer = probe("ready", "--name", "versioned")
    assert (code, answer["workers"]) == (
        1, [{"name": row.name, "pid": worker.pid, "version": "2026.11.1"}]), answer
    assert answer["problems"] == [
        f"worker {row.name} runs version '2026.11.1', the code here is '2026.11.2' "
        "(SQLQUEUE['VERSION']): restart it to load the code deployed"]
