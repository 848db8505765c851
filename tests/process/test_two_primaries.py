"""Queues spread over two primaries (docs/topology.md): "default" on the suite's cluster, and
"bulk_jobs" on a second PostgreSQL server of its own, with django-sqlqueue's tables migrated
there. Two workers drain each, racing on their own server; each job runs once, on a worker of
its own database, and the workers of one never see the other's jobs."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from django.db import connections

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.postgres_cluster import Cluster
from tests.support.waiting import wait_until
from tests.testapp.jobs import work
from tests.testapp.models import Run

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
JOBS = 400  # on each primary
SECOND = "bulk_jobs"


@pytest.fixture
def second_primary(pg_cluster, django_db_blocker):
    """A second server as the alias "bulk_jobs" of this process; the environment that gives it
    to subprocesses (tests/settings.py), migrated. Its job ids start at 1,000,000, so that
    the ``Run`` rows both write (to "default") tell the two apart."""
    if pg_cluster is None:
        pytest.skip("needs the suite's own cluster (DATABASE_URL names an outside server)")
    cluster = Cluster().start()
    try:
        with django_db_blocker.unblock():
            entry = {**connections["default"].settings_dict, "PORT": str(cluster.port),
                     "NAME": "sqlqueue_bulk", "TEST": {}}
        subprocess.run([str(cluster.bindir / "createdb"), "-h", "127.0.0.1", "-p",
                        str(cluster.port), "-U", "postgres", "sqlqueue_bulk"], check=True)
        env = {"SQLQUEUE_TEST_DATABASES_JSON": json.dumps({SECOND: entry})}
        migrate = subprocess.run(
            [sys.executable, "-m", "django", "migrate", "--database", SECOND, "--noinput",
             "-v", "0"],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **env},
        )
        assert migrate.returncode == 0, migrate.stdout + migrate.stderr
        connections.settings[SECOND] = connections.configure_settings({"default": entry})[
            "default"]
        with django_db_blocker.unblock():
            with connections[SECOND].cursor() as cursor:
                cursor.execute("ALTER SEQUENCE django_sqlqueue_job_id_seq RESTART WITH 1000000")
            yield env
            connections[SECOND].close()
        del connections[SECOND]
        del connections.settings[SECOND]
    finally:
        cluster.destroy()


def test_two_primaries_each_drained_by_its_own_workers(second_primary, start_worker, db_url):
    on_default = Job.objects.bulk_enqueue(
        Job.objects.prepare(work, kwargs={"key": f"default-{n}"}) for n in range(JOBS))
    on_second = Job.objects.bulk_enqueue(
        (Job.objects.prepare(work, kwargs={"key": f"bulk-{n}"}, queue="images")
         for n in range(JOBS)), using=SECOND)
    env = {**second_primary, "DATABASE_URL": db_url()}
    workers = [start_worker("--burst", "-c", "2", "--queue", "default", name=f"default-{n}",
                            env=env) for n in range(2)]
    workers += [start_worker("--burst", "-c", "2", "--database", SECOND, "--queue", "images",
                             name=f"bulk-{n}", env=env) for n in range(2)]
    for worker in workers:
        assert worker.wait(timeout=120) == 0, worker.output

    def succeeded(alias):
        return Job.objects.using(alias).filter(status=JobStatus.SUCCEEDED).count()

    wait_until(lambda: succeeded("default") == JOBS and succeeded(SECOND) == JOBS,
             what="every job on both primaries")
    runs = list(Run.objects.values_list("job_id", "key", "worker"))
    assert Counter(job_id for job_id, _, _ in runs) == Counter(
        job.pk for job in on_default + on_second)  # each ran once
    for job_id, key, worker in runs:
        own = "bulk-" if job_id >= 1_000_000 else "default-"
        assert key.startswith(own) and worker.startswith(own), (job_id, key, worker)
    assert not Job.objects.filter(queue="images").exists()
    assert not Job.objects.using(SECOND).exclude(queue="images").exists()
