import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db


def test_enqueue_claim_run():
    job = add.enqueue(2, 3)
    claimed = Job.objects.claim(["default"], "w1", limit=5)
    assert [j.pk for j in claimed] == [job.pk]
    result = run_job(claimed[0])
    assert result.outcome == "succeeded"
    job.refresh_from_db()
    assert job.result == 5
