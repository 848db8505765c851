"""The outcome write's NOTIFY for waiters (PostgreSQL's ``status_written``): sent, at commit,
for a job someone waits for (``awaited``) that ended; never for a job nobody waits for, so a
plain drain takes no NOTIFY lock at commit; not for a failure that runs again."""

import psycopg
import pytest
from django.db import connection, transaction

from django_sqlqueue.db import ops, returning
from django_sqlqueue.db.pieces import OutcomeRow
from django_sqlqueue.db.postgresql import FINISHED_CHANNEL, listen
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
    with psycopg.connect(**direct_connect_kwargs(), autocommit=True) as listening:
        listening.execute(listen(FINISHED_CHANNEL))
        yield lambda: sorted(int(note.payload) for note in listening.notifies(timeout=0.5))


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
