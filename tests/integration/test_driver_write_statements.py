"""The db/ drivers' statements that change rows besides the claim, each run against the real
database of this pass (SQLQUEUE_TEST_DATABASE): the same cases prove the PostgreSQL, SQLite and
MariaDB drivers (and replica_state, a read, at the end). The clock and the claim are in
test_driver_claim_statements.py.

Each test builds a statement with ``ops(connection)``, executes it (``returning.fetch`` runs
MariaDB's steps too) and reads the rows back through the ORM."""

import datetime as dt
import os
import threading
import uuid

import pytest
from django.db import OperationalError, connection, connections, transaction
from django.db.models import DateTimeField, UUIDField, Value
from django.utils import timezone

from django_sqlqueue.db import ops, returning
from django_sqlqueue.db.pieces import OutcomeRow
from django_sqlqueue.models import Job, JobStep, Leader, Schedule, ThroughputCount, Worker
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.transitions.changes import WORKER_LOST_TYPE
from tests.factories import JobFactory, WorkerFactory

pytestmark = pytest.mark.django_db
MARIADB = os.environ.get("SQLQUEUE_TEST_DATABASE") == "mariadb"
SECONDS = dt.timedelta(seconds=30)  # how far the database's clock may be from Python's


def fetch(statement, params) -> list:
    """``returning.fetch`` on this connection; its rows as a list of tuples (MariaDB's client
    returns a tuple)."""
    return [tuple(row) for row in returning.fetch(connection, statement, params)]


def running(**fields):
    """A running job claimed by "w1", its lease running for another minute."""
    at = timezone.now() - dt.timedelta(seconds=10)
    return JobFactory(running=True, enqueued_at=at, run_at=at, **fields)


def record(*outcomes) -> dict:
    """Run record_outcomes; {id: status written}."""
    statement = ops(connection).record_outcomes(Job, outcomes=list(outcomes))
    return dict(fetch(*statement))


def row(job) -> Job:
    return Job.objects.get(pk=job.pk)


def close_to_now(value) -> bool:
    return abs(value - timezone.now()) < SECONDS


# ---- record_outcomes ------------------------------------------------------------------------

def test_a_batch_of_successes_is_written_with_results_and_finish_times():
    one, two = running(), running()
    at = timezone.now().replace(microsecond=250001)
    written = record(OutcomeRow(one.pk, one.claim_token, "succeeded", {"n": [1]}, finished_at=at),
                     OutcomeRow(two.pk, two.claim_token, "succeeded", None, finished_at=at))
    assert written == {one.pk: "succeeded", two.pk: "succeeded"}
    for job, result in ((one, {"n": [1]}), (two, None)):
        job = row(job)
        assert (job.status, job.result, job.finished_at, job.lease_expires_at) == (
            "succeeded", result, at, None)
    # None is SQL NULL, as the ORM stores it, not JSON null.
    assert Job.objects.filter(pk=two.pk, result__isnull=True).exists()


def test_a_general_batch_writes_failures_retries_give_backs_and_interruptions():
    failing, released, interrupted = running(), running(max_attempts=3), running()
    errors = [{"attempt": 1, "type": "builtins.RuntimeError", "message": "boom"}]
    retry_at = (timezone.now() + dt.timedelta(minutes=5)).replace(microsecond=654321)
    written = record(
        OutcomeRow(failing.pk, failing.claim_token, "failed", errors=errors, run_at=retry_at),
        OutcomeRow(released.pk, released.claim_token, "queued", run_at=retry_at, give_back=True),
        OutcomeRow(interrupted.pk, interrupted.claim_token, "queued", interrupted=True),
    )
    assert written == {failing.pk: "failed", released.pk: "queued", interrupted.pk: "queued"}
    failed = row(failing)
    assert (failed.status, failed.errors, failed.run_at, failed.finished_at) == (
        "failed", errors, retry_at, None)
    assert (failed.max_attempts, failed.interruptions, failed.lease_expires_at) == (
        failing.max_attempts, 0, None)
    assert Job.objects.filter(pk=failing.pk, result__isnull=True).exists()
    given_back = row(released)
    assert (given_back.status, given_back.run_at, given_back.max_attempts) == (
        "queued", retry_at, 4)
    assert given_back.errors == [] and given_back.interruptions == 0  # errors None: kept
    again = row(interrupted)
    assert (again.interruptions, again.max_attempts) == (1, interrupted.max_attempts)
    assert again.run_at == interrupted.run_at  # run_at None: kept


def test_an_outcome_is_written_only_under_its_claim_token_while_running():
    stolen, released, mine = running(), running(), running()
    Job.objects.filter(pk=released.pk).update(status=JobStatus.QUEUED)  # no longer running
    done = timezone.now()
    # A batch of successes, then a general batch: each statement fences every row.
    assert record(OutcomeRow(stolen.pk, uuid.uuid4(), "succeeded", 1, finished_at=done),
                  OutcomeRow(released.pk, released.claim_token, "succeeded", 1, finished_at=done),
                  OutcomeRow(mine.pk, mine.claim_token, "succeeded", 1, finished_at=done),
                  ) == {mine.pk: "succeeded"}
    assert record(OutcomeRow(stolen.pk, uuid.uuid4(), "failed", errors=[{"a": 1}]),
                  OutcomeRow(released.pk, released.claim_token, "exhausted", finished_at=done),
                  ) == {}
    kept = row(stolen)
    assert (kept.status, kept.result, kept.errors, kept.lease_expires_at) == (
        "running", None, [], stolen.lease_expires_at)
    assert (row(released).status, row(released).result, row(released).finished_at) == (
        "queued", None, None)


def test_a_job_whose_cancel_was_asked_for_is_written_cancelled_whatever_the_outcome():
    asked = timezone.now() - dt.timedelta(seconds=5)
    success, failure, retry = (running(cancel_requested_at=asked) for _ in range(3))
    at = timezone.now().replace(microsecond=1)
    assert record(OutcomeRow(success.pk, success.claim_token, "succeeded", 7,
                             finished_at=at)) == {success.pk: "cancelled"}
    assert (row(success).status, row(success).result, row(success).finished_at) == (
        "cancelled", 7, at)
    written = record(
        OutcomeRow(failure.pk, failure.claim_token, "failed", errors=[{"m": "x"}],
                   run_at=at + dt.timedelta(minutes=1)),
        OutcomeRow(retry.pk, retry.claim_token, "queued", run_at=at, give_back=True))
    assert written == {failure.pk: "cancelled", retry.pk: "cancelled"}
    for job in (failure, retry):
        assert row(job).status == "cancelled"
        assert close_to_now(row(job).finished_at)  # none given: now, by the database


# ---- rescue_jobs ----------------------------------------------------------------------------

def rescue(picked, *, now=None, reason="its lease expired", message_limit=2000) -> dict:
    """Run rescue_jobs on the picked jobs as JobQuerySet.rescue picks them; {id: status}."""
    picked = picked.values("id", "claim_token", "lease_expires_at")
    if connection.features.has_select_for_update_skip_locked:
        picked = picked.select_for_update(skip_locked=True)
    picked_sql, picked_params = picked.query.get_compiler(using="default").as_sql()
    with transaction.atomic():
        return dict(fetch(*ops(connection).rescue_jobs(
            Job, picked_sql=picked_sql, picked_params=picked_params, now=now,
            error_type=WORKER_LOST_TYPE, reason=reason, message_limit=message_limit)))


def test_a_rescued_job_is_queued_again_with_its_attempt_given_back_and_an_entry():
    lost = running(max_attempts=2, errors=[{"earlier": True}])
    other = running()
    assert rescue(Job.objects.filter(pk=lost.pk)) == {lost.pk: "queued"}
    job = row(lost)
    assert (job.status, job.attempts, job.max_attempts, job.interruptions) == ("queued", 1, 3, 1)
    assert job.lease_expires_at is None and job.finished_at is None
    assert close_to_now(job.run_at)  # due now, by the database's clock
    first, entry = job.errors
    assert first == {"earlier": True}
    assert entry == {
        "type": WORKER_LOST_TYPE, "attempt": 1, "worker": "w1", "interrupted": True,
        "traceback": "", "at": entry["at"],
        "message": "worker w1 was lost while running attempt 1 (its lease expired); "
                   "interruption 1 of 3: the job runs again, the attempt not counted."}
    assert close_to_now(dt.datetime.fromisoformat(entry["at"]))
    assert row(other).status == "running"


def test_a_rescue_at_max_interruptions_exhausts_the_job():
    last = running(interruptions=2, max_interruptions=3, max_attempts=5)
    now = timezone.now().replace(microsecond=424242)
    assert rescue(Job.objects.filter(pk=last.pk), now=now, reason="gone",
                  message_limit=30) == {last.pk: "exhausted"}
    job = row(last)
    assert (job.status, job.finished_at, job.interruptions, job.max_attempts) == (
        "exhausted", now, 3, 5)
    assert job.run_at == last.run_at and job.lease_expires_at is None
    assert job.errors[-1]["message"] == "worker w1 was lost while runni"  # cut at 30
    assert dt.datetime.fromisoformat(job.errors[-1]["at"]) == now


def picked_as_read(job, *, claim_token, lease_expires_at) -> tuple:
    """picked_sql and its params that give ``job`` with the claim token and lease a caller
    read earlier, as rescue_jobs' fence compares them with the row's."""
    quote = connection.ops.quote_name
    as_read = Job.objects.filter(pk=job.pk).annotate(
        read_token=Value(claim_token, output_field=UUIDField()),
        read_lease=Value(lease_expires_at, output_field=DateTimeField()),
    ).values("id", "read_token", "read_lease")
    sql, params = as_read.query.get_compiler(using="default").as_sql()
    return (f"SELECT {quote('id')}, {quote('read_token')} AS {quote('claim_token')}, "  # noqa: S608
            f"{quote('read_lease')} AS {quote('lease_expires_at')} FROM ({sql}) AS as_read",
            params)


@pytest.mark.skipif(MARIADB, reason=(
    "MariaDB fences by the row locks of its lock step (mariadb/statements.rescue_jobs, as "
    "writes.rescue_jobs says): picked_sql is read with the rows locked, so values read earlier "
    "and passed in, as here, are not compared there"))
def test_a_rescue_leaves_a_job_whose_lease_or_claim_changed_since_it_was_picked():
    renewed, reclaimed = running(), running()
    new_lease = renewed.lease_expires_at + dt.timedelta(minutes=5)
    Job.objects.filter(pk=renewed.pk).update(lease_expires_at=new_lease)  # a heartbeat
    Job.objects.filter(pk=reclaimed.pk).update(claim_token=uuid.uuid4())  # claimed again

    def rescue_as_read(job, **as_read):
        picked_sql, picked_params = picked_as_read(job, **as_read)
        with transaction.atomic():
            return fetch(*ops(connection).rescue_jobs(
                Job, picked_sql=picked_sql, picked_params=picked_params,
                error_type=WORKER_LOST_TYPE, reason="r", message_limit=100))

    assert rescue_as_read(renewed, claim_token=renewed.claim_token,
                          lease_expires_at=renewed.lease_expires_at) == []
    assert rescue_as_read(reclaimed, claim_token=reclaimed.claim_token,
                          lease_expires_at=reclaimed.lease_expires_at) == []
    assert [row(job).status for job in (renewed, reclaimed)] == ["running", "running"]
    assert row(renewed).lease_expires_at == new_lease and row(renewed).errors == []
    # The values as they are now: rescued.
    assert rescue_as_read(renewed, claim_token=renewed.claim_token,
                          lease_expires_at=new_lease) == [(renewed.pk, "queued")]


# ---- delete_jobs ----------------------------------------------------------------------------

def test_delete_jobs_deletes_exactly_the_picked_jobs_and_returns_their_ids():
    jobs = [JobFactory(succeeded=True) for _ in range(4)]
    picked = Job.objects.filter(pk__in=[job.pk for job in jobs[1:]]).order_by("pk").values(
        "pk")[:2]
    picked_sql, picked_params = picked.query.get_compiler(using="default").as_sql()
    statement, params, left = ops(connection).delete_jobs(
        Job, picked_sql=picked_sql, picked_params=picked_params)
    assert sorted(pk for pk, in fetch(statement, params)) == [jobs[1].pk, jobs[2].pk]
    assert sorted(Job.objects.values_list("pk", flat=True)) == [jobs[0].pk, jobs[3].pk]
    assert left == ()


def test_delete_jobs_deletes_the_dependents_it_can_and_names_the_rest():
    """On PostgreSQL the jobs' steps go in the same statement, and none is left to the caller;
    elsewhere the statement deletes the jobs only and hands the dependents back."""
    jobs = [JobFactory(succeeded=True) for _ in range(3)]
    for job in jobs:
        JobStep.objects.create(job=job, name="charge", result={"paid": job.pk})
    picked = Job.objects.filter(pk__in=[jobs[0].pk, jobs[1].pk]).values("pk")
    picked_sql, picked_params = picked.query.get_compiler(using="default").as_sql()
    statement, params, left = ops(connection).delete_jobs(
        Job, picked_sql=picked_sql, picked_params=picked_params, dependents=[(JobStep, "job")])
    assert sorted(pk for pk, in fetch(statement, params)) == [jobs[0].pk, jobs[1].pk]
    steps = sorted(JobStep.objects.values_list("job_id", flat=True))
    if connection.vendor == "postgresql":
        assert (left, steps) == ((), [jobs[2].pk])
    else:
        assert (left, steps) == (((JobStep, "job"),), [job.pk for job in jobs])


# ---- add_throughput_counts ------------------------------------------------------------------

def test_adding_counts_to_a_bucket_already_there_sums_them():
    hour = dt.datetime(2030, 1, 1, 10, tzinfo=dt.timezone.utc)
    minute = hour + dt.timedelta(minutes=7)

    def add(rows):
        with connection.cursor() as cursor:
            cursor.execute(*ops(connection).add_throughput_counts(ThroughputCount, rows))

    add([(3600, hour, "default", "t", "succeeded", 3), (60, minute, "default", "t", "failed", 1)])
    add([(3600, hour, "default", "t", "succeeded", 4), (3600, hour, "other", "t", "succeeded", 2),
         (3600, hour, "default", "t", "failed", 5)])
    counts = {(c.period_seconds, c.bucket_at, c.queue, c.status): c.count
              for c in ThroughputCount.objects.all()}
    assert counts == {(3600, hour, "default", "succeeded"): 7,
                      (60, minute, "default", "failed"): 1,
                      (3600, hour, "other", "succeeded"): 2,
                      (3600, hour, "default", "failed"): 5}


# ---- elect_leader ---------------------------------------------------------------------------

def elect(holder, *, name="maintenance", term_seconds=60.0) -> list:
    return fetch(*ops(connection).elect_leader(
        Leader, Worker, name=name, holder=holder, term_seconds=term_seconds))


def test_a_term_is_taken_when_vacant_renewed_by_its_holder_and_not_taken_while_it_runs():
    assert elect("one") == [("one",)]
    first = Leader.objects.get(name="maintenance")
    assert close_to_now(first.elected_at)
    assert (first.expires_at - first.elected_at).total_seconds() == pytest.approx(60, abs=1)
    assert elect("two") == []  # one's term runs
    assert Leader.objects.get(name="maintenance").holder == "one"
    assert elect("one", term_seconds=600) == [("one",)]
    renewed = Leader.objects.get(name="maintenance")
    assert (renewed.holder, renewed.elected_at) == ("one", first.elected_at)  # the same reign
    assert renewed.expires_at - first.expires_at > dt.timedelta(seconds=500)
    assert elect("two", name="other") == [("two",)]  # each name its own term


def test_a_term_that_ran_out_or_whose_holder_is_gone_is_taken_over():
    elect("one")
    Leader.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=30))
    assert elect("two") == [("two",)]
    taken = Leader.objects.get()
    assert taken.holder == "two" and close_to_now(taken.expires_at - dt.timedelta(seconds=60))
    WorkerFactory(name="registered")
    assert elect("registered") == [("registered",)]  # "two" has no worker row: at once
    WorkerFactory(name="also-registered")
    assert elect("also-registered") == []  # a registered holder's running term
    assert Leader.objects.get().holder == "registered"


# ---- advance_schedule -----------------------------------------------------------------------

def test_a_schedule_cursor_moves_only_from_where_it_was_read():
    at = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    schedule = Schedule.objects.create(
        name="s", task_name="tests.testapp.tasks.add", every_seconds=60, next_run_at=at,
        version=2, created_at=at, synced_at=at)
    later = at + dt.timedelta(minutes=3)

    def advance(cursor, version, next_run_at, skipped=0, last_skipped_at=None):
        with transaction.atomic():
            return fetch(*ops(connection).advance_schedule(
                Schedule, schedule_id=schedule.pk, cursor=cursor, version=version,
                next_run_at=next_run_at, skipped=skipped, last_skipped_at=last_skipped_at))

    assert advance(at, 1, later) == []  # another version
    assert advance(at + dt.timedelta(seconds=1), 2, later) == []  # another cursor
    Schedule.objects.filter(pk=schedule.pk).update(paused_at=at)
    assert advance(at, 2, later) == []  # paused
    Schedule.objects.filter(pk=schedule.pk).update(paused_at=None)
    assert Schedule.objects.get().next_run_at == at
    assert advance(at, 2, later, skipped=2, last_skipped_at=later - dt.timedelta(minutes=1)) == [
        (schedule.pk,)]
    assert advance(at, 2, later) == []  # the cursor moved: a second process reading `at` loses
    moved = Schedule.objects.get()
    assert (moved.next_run_at, moved.skipped_ticks, moved.last_skipped_at) == (
        later, 2, later - dt.timedelta(minutes=1))
    assert advance(later, 2, later + dt.timedelta(minutes=1), skipped=1) == [(schedule.pk,)]
    moved = Schedule.objects.get()  # None keeps last_skipped_at
    assert (moved.skipped_ticks, moved.last_skipped_at) == (3, later - dt.timedelta(minutes=1))


# ---- statement_timeout, repeatable_read -----------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_a_statement_timeout_limits_the_statements_of_its_transaction_only():
    statement = ops(connection).statement_timeout(seconds=0.05)
    if statement is None:
        pytest.skip(f"the {ops(connection).name} driver has no statement timeout")
    sleep = {"postgresql": "SELECT pg_sleep(10)"}[connection.vendor]
    with pytest.raises(OperationalError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(*statement)
        cursor.execute(sleep)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(0.2)")  # the next transaction: no limit


@pytest.mark.django_db(transaction=True)
def test_a_repeatable_read_transaction_reads_one_snapshot():
    JobFactory()
    text = ops(connection).repeatable_read()

    def insert_and_commit():
        try:
            JobFactory()
        finally:
            connections.close_all()

    with transaction.atomic(), connection.cursor() as cursor:
        if text is not None:  # None: a transaction reads one snapshot anyway
            cursor.execute(text, [])
        assert Job.objects.count() == 1
        other = threading.Thread(target=insert_and_commit)
        other.start()
        other.join()
        assert Job.objects.count() == 1
    assert Job.objects.count() == 2


# ---- replica_state --------------------------------------------------------------------------

def test_the_database_of_the_pass_is_a_primary_and_reports_no_replica_state():
    # On PostgreSQL the statement runs and finds no standby; SQLite and MariaDB do not measure
    # it. A real standby's state is read in tests/admin/test_replica_reads.py.
    assert ops(connection).replica_state() is None
