"""Interruptions and max_interruptions (docs/concepts.md, "Failures and interruptions"): a run cut
short by an outage during which the database could not be reached is recorded but not counted
(the worker had to wait for it), even when the outage outlasts the job's lease; a run whose own
connection the server ended while it kept answering is counted. Real workers, a real
PostgreSQL server stopped and started (the suite's own cluster)."""

import time

import pytest
from django.db import connections

from django_sqlqueue.models import Job
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
        # Through PgBouncer the run after the first outage did not start within 60 s (the
        # server stopped, PgBouncer left up): not understood yet; the restarts of
        # chaos/test_database_outages.py do pass through it.
        pytest.skip("not yet through PgBouncer: the run after an outage waits (issue 42 note)")
    job = query_until.using(max_interruptions=1).enqueue("stop")
    worker = start_worker("-c", "1", settings=SETTINGS)
    for n in range(1, OUTAGES + 1):
        wait_until(lambda n=n: starts(job) == n, what=f"run {n} to start", worker=worker,
                   timeout=60)
        connections.close_all()
        pg_cluster.stop()
        time.sleep(LEASE_SECONDS * 1.5)  # the server away for longer than the job's lease
        pg_cluster.start()
    wait_until(lambda: starts(job) == OUTAGES + 1, what="the run after the last outage",
               worker=worker, timeout=60)
    Execution.objects.create(job_id=0, attempt=0, worker="", tag="stop")
    wait_until(lambda: Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED,
               what="the job to succeed", worker=worker)
    job.refresh_from_db()
    assert job.interruptions == 0, job.errors
    assert len(job.errors) == OUTAGES and all(entry["interrupted"] for entry in job.errors)
    assert all("not counted towards max_interruptions" in entry["message"]
               for entry in job.errors), job.errors
    assert worker.is_running(), worker.output
