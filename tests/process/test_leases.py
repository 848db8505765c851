"""Leases come from the database's clock, read when the claim takes the row."""

import os
import time

import pytest
from django.db import transaction

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.process.conftest import job_status
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import sleep_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.skipif(os.environ.get("SQLQUEUE_TEST_DATABASE", "postgresql") != "sqlite",
                    reason="SQLite's database-wide write lock")
def test_a_claim_that_waited_for_a_long_write_transaction_gets_a_whole_lease(start_worker):
    # A write transaction longer than the lease holds SQLite's write lock while the workers try
    # to claim; the job it enqueues becomes visible when it commits. A lease computed before the
    # wait would already be over: maintenance would rescue the running job and the other worker
    # would run it a second time, at the same time.
    settings = {"LEASE_SECONDS": 3, "MAINTENANCE_INTERVAL_SECONDS": 0.3,
                "POLL_INTERVAL_SECONDS": 0.2}
    workers = [start_worker(settings=settings) for _ in range(2)]
    wait_until(lambda: all("lease: 3s" in worker.output for worker in workers), what="workers up")
    time.sleep(0.5)  # both are polling: their next claims will wait for the lock
    with transaction.atomic():
        job = sleep_for.enqueue(2.5, tag="finished")
        time.sleep(4)  # longer than the lease
    wait_until(lambda: job_status(job.pk) == JobStatus.SUCCEEDED, what="the job",
               worker=workers[0])
    time.sleep(1)  # a second run, if any, would have started by now
    starts = Execution.objects.filter(job_id=job.pk, tag="started").count()
    assert starts == 1, [w.output for w in workers]
    assert Job.objects.get(pk=job.pk).errors == []  # never rescued
