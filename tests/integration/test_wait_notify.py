"""The outcome write's NOTIFY for waiters (PostgreSQL's ``status_written``): sent, at commit,
for a job someone waits for (``awaited``) that ended; never for a job nobody waits for, so a
plain drain takes no NOTIFY lock at commit; not for a failure that runs again."""

import pytest
from django.db import connection, transaction

from django_sqlqueue.db import ops, returning
from django_sqlqueue.db.base import FINISHED_CHANNEL
from django_sqlqueue.db.pieces import OutcomeRow
from django_sqlqueue.models import Job
from django_sqlqueue.run import outcomes
from django_sqlqueue.run.runner import Outcome, OutcomeKind
from tests.conftest import direct_connect_kwargs
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def heard():
    """The ids notified on FINISHED_CHANNEL, read after the statements under test."""
    if not ops(connection).supports_notify:
        pytest.skip("no NOTIFY on this database: waiters poll")
    with ops(connection).listen(direct_connect_kwargs(), [FINISHED_CHANNEL]) as listening:
        yield lambda: sorted(int(payload) for _, payload in listening.wait(0.5))


def test_only_awaited_jobs_that_ended_notify(heard):
    awaited, plain, retried = (JobFactory(running=True) for _ in range(3))
    Job.objects.filter(pk__in=[awaited.pk, retried.pk]).update(awaited=True)
    statement = ops(connection).record_outcomes(Job, outcomes=[
        OutcomeRow(awaited.pk, awaited.claim_token, "succeeded", 1, finished_at=awaited.run_at),
        OutcomeRow(plain.pk, plain.claim_token, "succeeded", 2, finished_at=plain.run_at),
    ])
    written = dict(returning.fetch(connection, *statement))
    assert written == {awaited.pk: "succeeded", plain.pk: "succeeded"}  # the status, as ever
    retried = Job.objects.get(pk=retried.pk)
    outcomes.write([(retried, outcomes.transition(
        retried, Outcome(OutcomeKind.FAILED, error=RuntimeError("again"))))], "default")
    assert Job.objects.get(pk=retried.pk).status == "failed"
    assert heard() == [awaited.pk]


def test_a_rolled_back_outcome_notifies_nobody(heard):
    job = JobFactory(running=True, awaited=True)
    with pytest.raises(RuntimeError), transaction.atomic():
        assert Job.objects.get(pk=job.pk).complete(3)
        raise RuntimeError("rolled back")
    assert heard() == []
    assert Job.objects.get(pk=job.pk).status == "running"


def test_a_waiter_marks_no_job_that_a_claim_could_take(heard):
    """The mark is an UPDATE: its row lock, held for that instant, makes a worker's claim (FOR
    UPDATE SKIP LOCKED) pass the job by, and it then waits for the worker's next look (the
    wait benchmark's pickup p95 was 103 ms against 5 ms without waiters). So a waiter polls a
    job while it is ready, and marks it once it runs (or waits for its parents)."""
    from django_sqlqueue.exceptions import WaitTimeout

    job = JobFactory()
    with pytest.raises(WaitTimeout):
        job.wait_finished(timeout=0.05)
    assert Job.objects.get(pk=job.pk).awaited is False  # ready: never locked by the waiter
    [claimed] = Job.objects.claim(None, "w1")
    with pytest.raises(WaitTimeout):
        claimed.wait_finished(timeout=0.05)
    assert Job.objects.get(pk=job.pk).awaited is True  # running: its outcome will notify
    assert claimed.complete(5)
    assert heard() == [job.pk]
