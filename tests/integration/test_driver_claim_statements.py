"""The db/ drivers' clock and claim statements, each run against the real database of this pass
(SQLQUEUE_TEST_DATABASE): the same cases prove the PostgreSQL, SQLite and MariaDB drivers.

Each test builds a statement with ``ops(connection)``, executes it (``returning.fetch`` for those
that change rows) and reads the rows back through the ORM. The write statements are in
test_driver_write_statements.py."""

import datetime as dt
import uuid

import pytest
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from django_sqlqueue.db import ops, returning
from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db
UTC = dt.timezone.utc


def fetch(statement, params) -> list:
    """``returning.fetch`` on this connection; its rows as a list of tuples (MariaDB's client
    returns a tuple)."""
    return [tuple(row) for row in returning.fetch(connection, statement, params)]


def due(minutes_ago=10, **fields):
    """A job due ``minutes_ago`` minutes ago (negative: in the future)."""
    at = timezone.now() - dt.timedelta(minutes=minutes_ago)
    return JobFactory(enqueued_at=at, run_at=at, **fields)


def select(statement) -> list:
    """Execute ``(sql, params)`` (the sql maybe a driver's steps); its rows."""
    return returning.fetch(connection, *statement)


def first_column(statement) -> list:
    return [row[0] for row in select(statement)]


def as_utc(value) -> dt.datetime:
    """A time as a driver returns it (SQLite and MariaDB: naive UTC, SQLite as text)."""
    value = parse_datetime(value) if isinstance(value, str) else value
    return value.replace(tzinfo=UTC) if timezone.is_naive(value) else value.astimezone(UTC)


def pks(*jobs) -> list:
    return [job.pk for job in jobs]


# ---- the clock ------------------------------------------------------------------------------

def test_the_database_clock_reads_utc_now():
    driver = ops(connection)
    [(now,)] = select((driver.read_clock(), []))
    assert abs(as_utc(now) - timezone.now()) < dt.timedelta(seconds=30)
    [(later,)] = select((f"SELECT {driver.now_sql(plus_seconds=True)}", [3600.0]))
    assert abs(as_utc(later) - as_utc(now) - dt.timedelta(hours=1)) < dt.timedelta(seconds=30)


def test_now_in_a_filter_compares_with_stored_times():
    past, future = due(1), due(-60)
    table = connection.ops.quote_name(Job._meta.db_table)
    assert first_column((f"SELECT id FROM {table} "  # noqa: S608 - names only
                         f"WHERE run_at <= {ops(connection).now_sql(in_filter=True)}", [])) == [
        past.pk]
    assert first_column((f"SELECT id FROM {table} "  # noqa: S608 - names only
                         f"WHERE run_at > {ops(connection).now_sql()}", [])) == [future.pk]


# ---- ready_ids ------------------------------------------------------------------------------

def test_ready_ids_are_the_due_waiting_jobs_in_claim_order():
    late_high = due(1, priority=5)
    old, tie_a = due(30), due(20)
    tie_b = JobFactory(enqueued_at=tie_a.run_at, run_at=tie_a.run_at)  # same time: by id
    retry = due(25, failed=True)
    not_expired = due(5, expires_at=timezone.now() + dt.timedelta(hours=1))
    low = due(60, priority=-3)
    for fields in ({"running": True}, {"succeeded": True}, {"exhausted": True},
                   {"cancelled": True}, {"expired": True}, {"stale": True}):
        due(40, **fields)  # not ready: claimed, finished, or its expiry passed
    due(-60)  # due in an hour

    ready = first_column(ops(connection).ready_ids(Job, limit=100))

    assert ready == pks(late_high, old, retry, tie_a, tie_b, not_expired, low)
    assert first_column(ops(connection).ready_ids(Job, limit=3)) == ready[:3]


def test_ready_ids_at_a_given_time_take_the_jobs_due_then():
    now_job, later = due(1), due(-60)
    in_two_hours = timezone.now() + dt.timedelta(hours=2)
    assert first_column(ops(connection).ready_ids(Job, limit=10, now=in_two_hours)) == pks(
        now_job, later)
    an_hour_ago = timezone.now() - dt.timedelta(hours=1)
    assert first_column(ops(connection).ready_ids(Job, limit=10, now=an_hour_ago)) == []


def test_ready_ids_of_one_queue_several_or_all():
    a, b, c = due(3, queue="a"), due(2, queue="b"), due(1, queue="c")
    driver = ops(connection)
    assert first_column(driver.ready_ids(Job, limit=10, queues=["b"])) == [b.pk]
    assert first_column(driver.ready_ids(Job, limit=10, queues=["c", "a"])) == pks(a, c)
    assert first_column(driver.ready_ids(Job, limit=10, queues=["nowhere"])) == []
    assert first_column(driver.ready_ids(Job, limit=10, queues=None)) == pks(a, b, c)


def test_ready_ids_after_a_position_go_on_in_claim_order_into_lower_priorities():
    high = due(50, priority=5)
    first, second = due(40), due(30)
    third = JobFactory(enqueued_at=second.run_at, run_at=second.run_at)  # same time: by id
    due(35, running=True)  # not ready, between them
    low = due(60, priority=-5)
    driver = ops(connection)

    def after(job, **options):
        position = (job.priority, job.run_at, job.pk)
        return first_column(driver.ready_ids_after(Job, after=position, **options))

    assert after(high, limit=10) == pks(first, second, third, low)
    assert after(first, limit=10) == pks(second, third, low)
    assert after(second, limit=10) == pks(third, low)
    assert after(second, limit=1) == pks(third)
    assert after(third, limit=10) == pks(low)
    assert after(low, limit=10) == []
    assert after(first, limit=10, queues=["other"]) == []


# ---- claim_jobs -----------------------------------------------------------------------------

def claim(limit, *, worker="w", token=None, lease_seconds=30.0, returned=("id", "attempts")):
    driver = ops(connection)
    picked_sql, picked_params = driver.ready_ids(Job, limit=limit)
    return fetch(*driver.claim_jobs(
        Job, picked_sql=picked_sql, picked_params=picked_params,
        values={"status": JobStatus.RUNNING, "claimed_by": worker,
                "claim_token": token or uuid.uuid4()},
        returning=returned, lease_seconds=lease_seconds))


def test_claim_jobs_sets_the_picked_rows_running_with_a_lease_by_the_database_clock():
    jobs = [due(3 - n, attempts=n) for n in range(3)]  # attempts 0, 1, 2
    token = uuid.uuid4()
    rows = claim(2, token=token, returned=("id", "attempts", "queue"))
    assert sorted(row[:3] for row in rows) == [(jobs[0].pk, 1, "default"),
                                               (jobs[1].pk, 2, "default")]
    # The claim time, last, the same for every row and as the rows store it.
    [claimed_at] = {as_utc(row[3]) for row in rows}
    for job in Job.objects.filter(pk__in=pks(*jobs[:2])):
        assert (job.status, job.claimed_by, job.claim_token) == ("running", "w", token)
        assert job.claimed_at == claimed_at
        assert (job.lease_expires_at - job.claimed_at).total_seconds() == pytest.approx(
            30, abs=0.002)
        assert abs(job.claimed_at - timezone.now()) < dt.timedelta(seconds=30)
    untouched = Job.objects.get(pk=jobs[2].pk)
    assert (untouched.status, untouched.attempts, untouched.claim_token) == ("queued", 2, None)


def test_claim_jobs_without_a_lease_sets_only_the_values():
    job = due()
    at = timezone.now().replace(microsecond=123456)
    driver = ops(connection)
    picked = driver.ready_ids(Job, limit=1)
    rows = fetch(*driver.claim_jobs(
        Job, picked_sql=picked[0], picked_params=picked[1],
        values={"status": JobStatus.RUNNING, "claimed_by": "w", "claimed_at": at},
        returning=("id",)))
    assert rows == [(job.pk,)]  # no claim time appended
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.claimed_at, row.lease_expires_at, row.attempts) == (
        "running", at, None, 1)


def test_two_claims_never_return_the_same_row():
    jobs = [due(3 - n) for n in range(3)]
    first = {row[0] for row in claim(2, worker="one")}
    second = {row[0] for row in claim(5, worker="two")}
    assert first | second == set(pks(*jobs)) and not first & second
    assert claim(5, worker="three") == []
    by_worker = dict(Job.objects.values_list("id", "claimed_by"))
    assert {by_worker[pk] for pk in first} == {"one"} and {by_worker[pk] for pk in second} == {
        "two"}
    assert set(Job.objects.values_list("attempts", flat=True)) == {1}


# ---- the limited claim's reads --------------------------------------------------------------

def test_ready_queues_are_the_distinct_queues_with_waiting_jobs_in_name_order():
    due(1, queue="b"), due(2, queue="a", failed=True), due(3, queue="a")
    due(-60, queue="e")  # waiting, not yet due: still a queue to look at
    due(1, queue="c", running=True), due(1, queue="d", succeeded=True)
    driver = ops(connection)
    assert first_column(driver.ready_queues(Job, limit=10)) == ["a", "b", "e"]
    assert first_column(driver.ready_queues(Job, limit=2)) == ["a", "b"]


def test_ready_keys_are_a_queues_distinct_concurrency_keys_in_order():
    for key in ("k2", "k1", "k1", ""):
        due(1, queue="q", concurrency_key=key)
    due(1, queue="q", concurrency_key="k0", running=True)
    due(1, queue="other", concurrency_key="k9")
    driver = ops(connection)
    assert first_column(driver.ready_keys(Job, queue="q", limit=10)) == ["k1", "k2"]
    assert first_column(driver.ready_keys(Job, queue="q", limit=1)) == ["k1"]
    assert first_column(driver.ready_keys(Job, queue="none", limit=10)) == []
    # The fair claim's: with the jobs without a key (""), and from after a key.
    assert first_column(driver.ready_keys(Job, queue="q", unkeyed=True, limit=10)) == [
        "", "k1", "k2"]
    assert first_column(driver.ready_keys(Job, queue="q", after="k1", limit=10)) == ["k2"]
    assert first_column(driver.ready_keys(Job, queue="q", after="", limit=1)) == ["k1"]


def test_ready_ids_by_key_takes_at_most_the_wanted_rows_of_each_key_in_claim_order():
    k1 = [due(5, queue="q", concurrency_key="k1", priority=p) for p in (1, 3, 2)]
    k2 = [due(m, queue="q", concurrency_key="k2") for m in (4, 3)]
    unkeyed = [due(m, queue="q") for m in (2, 6)]
    due(1, queue="q", concurrency_key="k3")  # a key not wanted
    due(9, queue="q", concurrency_key="k1", priority=9, running=True)
    due(-60, queue="q", concurrency_key="k1", priority=9)  # not yet due
    due(9, queue="other", concurrency_key="k1", priority=9)
    now = Job._meta.get_field("run_at").get_db_prep_value(timezone.now(), connection)

    rows = select(ops(connection).ready_ids_by_key(
        Job, queue="q", wanted={"": 1, "k1": 2, "k2": 5}, now=now))

    assert sorted((pk, key) for pk, key, *_ in rows) == sorted(
        [(unkeyed[1].pk, ""), (k1[1].pk, "k1"), (k1[2].pk, "k1"),
         (k2[0].pk, "k2"), (k2[1].pk, "k2")])
    by_id = {pk: (priority, as_utc(run_at)) for pk, _, priority, run_at in rows}
    assert by_id[k1[1].pk] == (3, k1[1].run_at)  # each row's priority and run_at
