"""A worker whose queue lives in a database of its own runs jobs that write business data to
"default"."""

import pytest
from django.db import transaction

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.testapp.models import Execution, Order
from tests.testapp.tasks import record

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "jobs"])


def test_a_worker_drains_the_jobs_database_and_the_jobs_write_to_default(
    start_worker, db_url, jobs_database
):
    with transaction.atomic():
        orders = [Order.objects.create(total=n) for n in range(5)]
        jobs = [record.enqueue_on_commit(tag=str(order.pk)) for order in orders]
    assert Job.objects.using("jobs").count() == 5
    worker = start_worker("--burst", env={
        "SQLQUEUE_TEST_JOBS_DATABASE": "1", "JOBS_DATABASE_URL": db_url("jobs"),
    })
    assert worker.wait() == 0, worker.output
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
    # The jobs' own writes (Execution rows) went to "default", as the router says.
    assert sorted(Execution.objects.using("default").values_list("job_id", flat=True)) == sorted(
        job.pk for job in jobs
    )
    assert not Job.objects.using("default").exists()
