"""The worker's outcome writer: outcomes of every kind in one fenced statement, and a job held
(its lease renewed) until its outcome is written."""

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.run.runner import Outcome, OutcomeKind
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.heartbeat import Heartbeat
from django_sqlqueue.worker.outcome_writer import OutcomeWriter
from django_sqlqueue.worker.pool import Pool
from tests.support.waiting import wait_until
from tests.testapp.tasks import add, gated

pytestmark = pytest.mark.django_db(transaction=True)


def claimed(n, **options):
    for i in range(n):
        add.using(**options).enqueue(i, i)
    return Job.objects.claim(None, "w1", limit=n, lease=30)


def test_one_batch_writes_successes_failures_and_reschedules_fenced():
    written = []
    writer = OutcomeWriter(alias="default", on_written=lambda *item: written.append(item))
    done, failing, exhausted, later, stolen = claimed(5, max_attempts=2)
    Job.objects.filter(pk=exhausted.pk).update(max_attempts=1)
    exhausted.max_attempts = 1
    Job.objects.filter(pk=stolen.pk).update(claim_token=None)  # re-claimed meanwhile
    writer.submit(done, Outcome(OutcomeKind.SUCCEEDED, result={"ok": [1]}))
    writer.submit(failing, Outcome(OutcomeKind.FAILED, error=RuntimeError("boom"), delay=60))
    writer.submit(exhausted, Outcome(OutcomeKind.FAILED, error=RuntimeError("last")))
    writer.submit(later, Outcome(OutcomeKind.RESCHEDULED, delay=120))
    writer.submit(stolen, Outcome(OutcomeKind.SUCCEEDED, result=1))
    assert written == []  # batched: nothing is written before the flush
    assert writer.flush() == 5
    assert [(job.pk, applied) for job, _, applied in written] == [
        (done.pk, True), (failing.pk, True), (exhausted.pk, True), (later.pk, True),
        (stolen.pk, False),
    ]
    rows = {job.pk: job for job in Job.objects.all()}
    assert rows[done.pk].status == JobStatus.SUCCEEDED and rows[done.pk].result == {"ok": [1]}
    assert rows[failing.pk].status == JobStatus.FAILED
    assert [e["message"] for e in rows[failing.pk].errors] == ["boom"]
    assert 59 < (rows[failing.pk].run_at - rows[failing.pk].claimed_at).total_seconds() < 62
    assert rows[exhausted.pk].status == JobStatus.EXHAUSTED and rows[exhausted.pk].finished_at
    assert rows[later.pk].status == JobStatus.QUEUED and rows[later.pk].max_attempts == 3
    assert rows[stolen.pk].status == JobStatus.RUNNING  # the fence kept the other claim's row
    assert all(rows[pk].lease_expires_at is None for pk in (done.pk, failing.pk, later.pk))


def test_a_job_stays_held_and_its_lease_renewed_until_its_outcome_is_written():
    pool = Pool(1, alias="default", default_timeout=None, on_slot_free=lambda: None)
    writer = OutcomeWriter(alias="default", on_written=pool.outcome_written)  # not started
    pool.writer = writer
    pool.start()
    try:
        [job] = claimed(1)
        Job.objects.filter(pk=job.pk).update(lease_expires_at=job.claimed_at)  # nearly over
        pool.submit(job)
        # The job ran; its success waits for the writer.
        wait_until(writer.pending, what="the job's outcome to wait for the writer")
        assert [entry.job.pk for entry in pool.held()] == [job.pk]
        assert pool.free_slots() == pool.capacity()  # its thread is free for the next job
        beat = Heartbeat(worker_id="w1", alias="default", pool=pool, lease_seconds=30,
                         on_timeout=None, on_missing_row=lambda: None)
        assert beat.run_once() == 1  # the lease is renewed although the job has finished
        renewed = Job.objects.get(pk=job.pk)
        assert renewed.status == JobStatus.RUNNING
        assert (renewed.lease_expires_at - job.claimed_at).total_seconds() > 25
        assert writer.flush() == 1
        assert pool.is_idle() and Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED
    finally:
        pool.stop(wait=10)


def test_unwritten_outcomes_past_the_backlog_cap_stop_claims():
    pool = Pool(2, alias="default", default_timeout=None, on_slot_free=lambda: None,
                max_backlog=2)
    writer = OutcomeWriter(alias="default", on_written=pool.outcome_written)  # not started
    pool.writer = writer
    pool.start()
    try:
        first, second = claimed(2)
        pool.submit(first)
        pool.submit(second)
        wait_until(lambda: writer.pending() >= 2, what="both outcomes to wait for the writer")
        assert pool.unwritten() == 2 and pool.free_slots() == 0  # the writer must catch up
        writer.flush()
        assert pool.unwritten() == 0 and pool.free_slots() == pool.capacity()
    finally:
        pool.stop(wait=10)


def test_two_claims_of_one_job_in_a_batch_are_told_apart():
    # A worker whose lease was lost claimed the job again after its rescue, and both attempts
    # ended at once: only the new claim's outcome is written, and the old one's is lost.
    written = []
    writer = OutcomeWriter(alias="default", on_written=lambda *item: written.append(item))
    [old] = claimed(1)
    Job.objects.filter(pk=old.pk).update(status=JobStatus.FAILED)  # the rescue, due now
    [new] = Job.objects.claim(None, "w1", limit=1)
    assert new.pk == old.pk and new.claim_token != old.claim_token
    writer.submit(old, Outcome(OutcomeKind.SUCCEEDED, result="old"))
    writer.submit(new, Outcome(OutcomeKind.SUCCEEDED, result="new"))
    assert writer.flush() == 2
    assert [(job, applied) for job, _, applied in written] == [(old, False), (new, True)]
    assert [job.status for job, _, _ in written] == [JobStatus.RUNNING, JobStatus.SUCCEEDED]
    row = Job.objects.get(pk=new.pk)
    assert row.status == JobStatus.SUCCEEDED and row.result == "new"


def test_an_outcome_with_no_other_job_running_is_written_without_waiting_for_the_interval(
        tmp_path):
    """An outcome waits for others to share its write only while other jobs run: a chain's
    steps, one at a time, would each wait the whole interval for nothing. The interval here is
    an hour, so only the wake of a job finishing alone can write anything."""
    pool = Pool(2, alias="default", default_timeout=None, on_slot_free=lambda: None)
    writer = OutcomeWriter(alias="default", on_written=pool.outcome_written, interval=3600)
    pool.writer = writer
    writer.start()
    pool.start()
    gate = tmp_path / "gate"
    try:
        gated.enqueue(str(gate), tag="slow")
        add.enqueue(1, 2)
        slow, quick = Job.objects.claim(None, "w1", limit=2, lease=30)
        pool.submit(slow)
        pool.submit(quick)
        # The quick job finished while the slow one still runs: it waits for company.
        wait_until(writer.pending, what="the quick job's outcome to wait for the writer")
        assert Job.objects.get(pk=quick.pk).status == JobStatus.RUNNING
        gate.touch()  # the slow job ends alone: both outcomes are written at once
        wait_until(lambda: set(Job.objects.values_list("status", flat=True))
                   == {JobStatus.SUCCEEDED}, what="both outcomes to be written")
    finally:
        pool.stop(wait=10)
        writer.stop()


#: A trigger that makes the database refuse one job's success (an error that is not an outage,
#: as MariaDB's "Error on delete of '/tmp/#sql-update-...'" was when its temporary file went).
REFUSE_SUCCESS = {
    "sqlite": ["CREATE TRIGGER sqlqueue_test_refuse BEFORE UPDATE ON django_sqlqueue_job "
               "WHEN NEW.id = {pk} AND NEW.status = 'succeeded' "
               "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"],
    "postgresql": ["CREATE FUNCTION sqlqueue_test_refuse() RETURNS trigger AS $$ BEGIN "
                   "RAISE EXCEPTION 'refused by the test'; END $$ LANGUAGE plpgsql",
                   "CREATE TRIGGER sqlqueue_test_refuse BEFORE UPDATE ON django_sqlqueue_job "
                   "FOR EACH ROW WHEN (NEW.id = {pk} AND NEW.status = 'succeeded') "
                   "EXECUTE FUNCTION sqlqueue_test_refuse()"],
    "mysql": ["CREATE TRIGGER sqlqueue_test_refuse BEFORE UPDATE ON django_sqlqueue_job "
              "FOR EACH ROW BEGIN IF NEW.id = {pk} AND NEW.status = 'succeeded' THEN "
              "SIGNAL SQLSTATE '23000' SET MYSQL_ERRNO = 1062, "
              "MESSAGE_TEXT = 'refused by the test'; END IF; END"],
}

DROP_REFUSAL = {
    "sqlite": ["DROP TRIGGER sqlqueue_test_refuse"],
    "postgresql": ["DROP TRIGGER sqlqueue_test_refuse ON django_sqlqueue_job",
                   "DROP FUNCTION sqlqueue_test_refuse()"],
    "mysql": ["DROP TRIGGER sqlqueue_test_refuse"],
}


def test_an_outcome_the_database_refuses_is_given_up_alone_and_the_writer_goes_on():
    """Before, the error escaped the writer's thread and ended it: the worker went on claiming
    while no outcome was ever written again, every job it held renewed for ever."""
    from django.db import connection

    written = []
    writer = OutcomeWriter(alias="default", on_written=lambda *item: written.append(item))
    refused, fine = claimed(2)
    with connection.cursor() as cursor:
        for statement in REFUSE_SUCCESS[connection.vendor]:
            cursor.execute(statement.format(pk=int(refused.pk)))
    try:
        writer.submit(refused, Outcome(OutcomeKind.SUCCEEDED, result=1))
        writer.submit(fine, Outcome(OutcomeKind.SUCCEEDED, result=2))
        assert writer.flush() == 2
    finally:  # the flush between tests keeps triggers, and ids may be used again
        with connection.cursor() as cursor:
            for statement in DROP_REFUSAL[connection.vendor]:
                cursor.execute(statement)
    assert [(job.pk, applied) for job, _, applied in written] == [
        (refused.pk, False), (fine.pk, True)]
    assert Job.objects.get(pk=fine.pk).status == JobStatus.SUCCEEDED
    # Given up: still running under its lease, which brings it back (at least once).
    assert Job.objects.get(pk=refused.pk).status == JobStatus.RUNNING
