"""The claim reads the database's clock once, after taking its rows."""

import os

import pytest

from django_sqlqueue.models import Job
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db(transaction=True)


def test_jobs_claimed_together_share_their_claim_time_and_a_whole_lease():
    enqueued = [add.enqueue(n, n) for n in range(5)]
    claimed = Job.objects.claim(None, "w1", limit=5, lease=30)
    assert len(claimed) == 5
    rows = Job.objects.filter(pk__in=[job.pk for job in claimed])
    assert len({row.claimed_at for row in rows}) == 1  # one claim, one time
    for job, row in zip(sorted(claimed, key=lambda j: j.pk), rows.order_by("pk"), strict=True):
        assert (job.claimed_at, job.lease_expires_at) == (row.claimed_at, row.lease_expires_at)
        assert 29.9 <= (row.lease_expires_at - row.claimed_at).total_seconds() <= 30.1
        assert row.claimed_at >= max(e.enqueued_at for e in enqueued)


@pytest.mark.skipif(os.environ.get("SQLQUEUE_TEST_DATABASE", "postgresql") != "sqlite",
                    reason="SQLite stores local time without USE_TZ")
def test_without_use_tz_the_claim_time_is_local_time_as_django_stores_it(settings):
    settings.USE_TZ = False
    settings.TIME_ZONE = "Asia/Kolkata"  # far from UTC, with a half-hour offset
    job = add.enqueue(1, 1)
    [claimed] = Job.objects.claim(None, "w1", lease=30)
    row = Job.objects.get(pk=job.pk)
    assert claimed.claimed_at == row.claimed_at and row.claimed_at.tzinfo is None
    assert abs((row.claimed_at - row.enqueued_at).total_seconds()) < 5
    assert (row.lease_expires_at - row.claimed_at).total_seconds() == pytest.approx(30, abs=0.01)
