"""The completer writes many successes in one fenced statement."""

import pytest

from django_sqlqueue.execution import Outcome
from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.completer import Completer
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db


def test_one_flush_writes_every_success_and_skips_lost_claims(django_assert_num_queries):
    for n in range(5):
        add.enqueue(n, n)
    jobs = Job.objects.claim(None, "w1", limit=5)
    stale = jobs[0]
    Job.objects.filter(pk=stale.pk).update(status=JobStatus.QUEUED)  # rescued meanwhile
    completer = Completer(alias="default")
    results = [{"n": n}, None, [1, "two"], "text", 3.5]
    for job, result in zip(jobs, results, strict=True):
        completer.add(job, Outcome("succeeded", result=result))
    with django_assert_num_queries(1):
        assert completer.flush() == 5
    rows = {job.pk: job for job in Job.objects.all()}
    assert rows[stale.pk].status == JobStatus.QUEUED  # fenced: not overwritten
    for job, result in list(zip(jobs, results, strict=True))[1:]:
        assert rows[job.pk].status == JobStatus.SUCCEEDED
        assert rows[job.pk].result == result
        assert rows[job.pk].finished_at is not None and rows[job.pk].lease_expires_at is None
    # None is stored as SQL NULL, as the ORM's complete() stores it.
    assert Job.objects.filter(pk=jobs[1].pk, result__isnull=True).exists()
    assert completer.flush() == 0
