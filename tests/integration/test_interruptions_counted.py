"""The other side of tests/process/test_outage_interruptions.py: a job whose own connection the
server ends while it keeps answering is interrupted, and that counts towards max_interruptions
(a job that breaks its connections could otherwise run for ever)."""

import pytest
from django.db import connection

from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.statuses import JobStatus
from tests.testapp.tasks import lose_own_connection

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_job_whose_own_connection_died_while_the_server_answered_is_counted():
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no server to end a connection")
    job = lose_own_connection.using(max_interruptions=2).enqueue()
    (claimed,) = Job.objects.claim(worker_id="w", limit=1)
    assert run_job(claimed).outcome == "interrupted"  # runs again, the attempt given back
    job.refresh_from_db()
    assert (job.status, job.interruptions) == (JobStatus.QUEUED, 1)
    assert "interruption 1 of 2" in job.errors[-1]["message"]
    (claimed,) = Job.objects.claim(worker_id="w", limit=1)
    run_job(claimed)
    job.refresh_from_db()
    assert (job.status, job.interruptions) == (JobStatus.EXHAUSTED, 2)
