"""Interruptions and max_interruptions (docs/concepts.md, "Failures and interruptions"): a run cut
short by an outage during which the database could not be reached is recorded but not counted
(the worker had to wait for it), even when the outage outlasts the job's lease; a run whose own
connection the server ended while it kept answering is counted. Real workers, a real
PostgreSQL server stopped and started (the suite's own cluster)."""

import time

import pytest
from django.db import connections
from django.utils import timezone

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.statuses import JobStatus
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import query_until

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]
LEASE_SECONDS = 2
SETTINGS = {"LEASE_SECONDS": LEASE_SECONDS, "MAINTENANCE_INTERVAL_SECONDS": 0.3,
            "POLL_INTERVAL_SECONDS": 0.2}
OUTAGES = 3


def starts(job) -> int:
    return Execution.objects.filter(job_id=job.pk, tag="started").count()


def test_outages_longer_than_a_lease_do_not_use_up_max_interruptions(start_worker, pg_cluster):
    if pg_cluster is None:
        pytest.skip("needs the suite's own cluster (DATABASE_URL names an outside server)")
    if pg_cluster.pgbouncer is not None:
        pytest.skip("through PgBouncer: the test below")
    job = query_until.using(max_interruptions=1).enqueue("stop")
    worker = start_worker("-c", "1", settings=SETTINGS)
    for n in range(1, OUTAGES + 1):
        wait_until(lambda n=n: starts(job) == n, what=f"run {n} to start", worker=worker,
                   timeout=60)
        outage(pg_cluster)
    wait_until(lambda: starts(job) == OUTAGES + 1, what="the run after the last outage",
               worker=worker, timeout=60)
    job = finish(job, worker)
    assert job.interruptions == 0, job.errors
    assert len(job.errors) == OUTAGES and all(entry["interrupted"] for entry in job.errors)
    assert all("not counted towards max_interruptions" in entry["message"]
               for entry in job.errors), job.errors


def test_outages_behind_pgbouncer_count_no_interruption(start_worker, pg_cluster):
    """Through PgBouncer (transaction pooling, left up while PostgreSQL stops), a job's query
    that arrives during the outage waits in the pooler's queue and goes on once the server is
    back: the run is not cut short at all. A query refused outright (a login during PgBouncer's
    server_login_retry) cuts it short as an outage. Either way no interruption is counted
    towards its max_interruptions=1, the job succeeds, and the worker stays up."""
    if pg_cluster is None or pg_cluster.pgbouncer is None:
        pytest.skip("the pgbouncer pass")
    job = query_until.using(max_interruptions=1).enqueue("stop")
    worker = start_worker("-c", "1", settings=SETTINGS)
    wait_until(lambda: starts(job) == 1, what="the first run to start", worker=worker,
               timeout=60)
    for _ in range(OUTAGES):
        outage(pg_cluster)
        # By construction, not by time: the worker's heartbeat went through the pooler again
        # after the restart before the next outage.
        back = timezone.now()
        wait_until(lambda back=back: Worker.objects.filter(last_heartbeat_at__gt=back).exists(),
                   what="a heartbeat after the outage", worker=worker, timeout=60)
    job = finish(job, worker)
    assert job.interruptions == 0, job.errors
    assert starts(job) == len(job.errors) + 1, job.errors  # a run per cut, and the last one
    assert all(entry["interrupted"] and "not counted towards max_interruptions"
               in entry["message"] for entry in job.errors), job.errors


def outage(pg_cluster) -> None:
    """The server away for longer than a job's lease."""
    connections.close_all()
    pg_cluster.stop()
    time.sleep(LEASE_SECONDS * 1.5)
    pg_cluster.start()


def finish(job, worker):
    Execution.objects.create(job_id=0, attempt=0, worker="", tag="stop")
    wait_until(lambda: Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED,
               what="the job to succeed", worker=worker)
    assert worker.is_running(), worker.output
    job.refresh_from_db()
    return job
