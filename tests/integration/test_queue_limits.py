"""Pauses and limits, enforced by the claim (claim/limited.py), one claim at a time. The races
between worker processes are in tests/process/test_limits_race.py."""

import datetime as dt

import pytest
from django.db import connection
from django.utils import timezone

from django_sqlqueue.claim.limited import read_controls
from django_sqlqueue.exceptions import InvalidConcurrencyKey, InvalidQueueLimit
from django_sqlqueue.models import Job, Queue
from django_sqlqueue.queues import control as queue_control
from django_sqlqueue.statuses import JobStatus
from tests.support.claims import claim
from tests.support.plans import explain
from tests.support.sqlite_writer import errors_behind_another_writer
from tests.testapp.tasks import add, send_email

pytestmark = pytest.mark.django_db(transaction=True)


def finish(jobs):
    Job.objects.filter(pk__in=[job.pk for job in jobs]).update(
        status=JobStatus.SUCCEEDED, finished_at=timezone.now())


def test_a_paused_queue_is_not_claimed_and_enqueue_goes_on():
    queue_control.pause("emails", by="alice")
    send_email.enqueue("a@example.com")  # enqueue works while paused
    add.enqueue(1, 2)
    assert [job.queue for job in claim()] == ["default"]
    assert claim(["emails"]) == []
    row = Queue.objects.get(name="emails")
    assert row.paused_by == "alice" and row.is_paused
    queue_control.resume("emails")
    assert [job.queue for job in claim()] == ["emails"]


def test_a_queue_concurrency_limit_counts_running_jobs_of_every_worker():
    queue_control.set_limits("default", concurrency_limit=3)
    Job.objects.bulk_enqueue(add.prepare(i, i) for i in range(10))
    first = Job.objects.claim(None, "w1", limit=2)
    second = Job.objects.claim(None, "w2", limit=5)
    assert (len(first), len(second)) == (2, 1)
    assert claim() == []
    finish(first)
    assert len(claim()) == 2


def test_a_limited_claim_takes_jobs_in_claim_order():
    queue_control.set_limits("default", concurrency_limit=2)
    low = add.using(priority=-5).enqueue(0, 0)
    high = add.using(priority=5).enqueue(1, 1)
    normal = add.enqueue(2, 2)
    assert [job.pk for job in claim()] == [high.pk, normal.pk]
    assert low.pk not in {job.pk for job in claim()}


def test_a_rate_limit_counts_starts_in_a_sliding_period():
    queue_control.set_limits("default", rate_limit=3, rate_period_seconds=60)
    Job.objects.bulk_enqueue(add.prepare(i, i) for i in range(10))
    start = timezone.now()
    started = claim(now=start, limit=2)
    finish(started)  # finished jobs still count: the limit is on starts
    assert len(claim(now=start + dt.timedelta(seconds=30))) == 1
    assert claim(now=start + dt.timedelta(seconds=59)) == []
    # The first two starts leave the period; the third is still in it.
    assert len(claim(now=start + dt.timedelta(seconds=61))) == 2
    assert claim(now=start + dt.timedelta(seconds=62)) == []


def test_a_key_at_its_limit_lets_other_keys_and_unkeyed_jobs_through():
    queue_control.set_limits("default", key_concurrency_limit=2)
    # A backlog of one key in front of everything else.
    Job.objects.bulk_enqueue(add.using(concurrency_key="big", priority=9).prepare(i, i)
                             for i in range(200))
    small = [add.using(concurrency_key=f"small-{n}").enqueue(n, n) for n in range(3)]
    unkeyed = add.enqueue(0, 0)
    jobs = claim(limit=100)
    keys = sorted(job.concurrency_key or "" for job in jobs)
    assert keys == ["", "big", "big", "small-0", "small-1", "small-2"]
    assert {job.pk for job in jobs} >= {*(job.pk for job in small), unkeyed.pk}
    assert claim() == []  # every key is at its limit, or has nothing left


def test_a_key_rate_limit_is_per_key():
    queue_control.set_limits("default", key_rate_limit=1, rate_period_seconds=3600)
    for key in ("a", "a", "b"):
        add.using(concurrency_key=key).enqueue(1, 1)
    assert sorted(job.concurrency_key for job in claim()) == ["a", "b"]
    assert claim() == []


def test_a_limited_queue_does_not_hold_back_unlimited_queues():
    queue_control.set_limits("emails", concurrency_limit=0)
    send_email.enqueue("x@example.com")
    job = add.enqueue(1, 1)
    assert [j.pk for j in claim()] == [job.pk]
    assert [j.pk for j in claim(["emails", "default"])] == []


def test_the_concurrency_key_comes_from_the_task_or_the_enqueue():
    assert add.using(concurrency_key="t").enqueue(1, 1).concurrency_key == "t"
    assert add.enqueue(1, 1).concurrency_key == ""  # no key
    job = Job.objects.enqueue(add, (1, 1), concurrency_key="customer-7")
    assert Job.objects.get(pk=job.pk).concurrency_key == "customer-7"
    with pytest.raises(InvalidConcurrencyKey, match="non-empty string"):
        Job.objects.enqueue(add, (1, 1), concurrency_key="")


def test_bad_limits_are_refused_with_the_fix():
    with pytest.raises(InvalidQueueLimit, match="whole number"):
        queue_control.set_limits("default", concurrency_limit=-1)
    with pytest.raises(InvalidQueueLimit, match="above 0"):
        queue_control.set_limits("default", rate_period_seconds=0)
    with pytest.raises(TypeError, match="valid limits are"):
        queue_control.set_limits("default", concurrency=3)


def test_the_controls_name_paused_and_limited_queues():
    assert read_controls(Queue, "default").unused
    queue_control.pause("a")
    queue_control.set_limits("b", rate_limit=5)
    queue_control.set_limits("c", rate_limit=None)  # a row without limits holds nothing back
    controls = read_controls(Queue, "default")
    assert (controls.paused, controls.limited) == ({"a"}, {"b"})


def test_states_say_what_the_waiting_jobs_wait_for():
    queue_control.set_limits("default", concurrency_limit=1, key_concurrency_limit=1)
    add.using(concurrency_key="k").enqueue(1, 1)
    add.using(concurrency_key="k").enqueue(1, 1)
    claim()
    queue_control.pause("emails")
    send_email.enqueue("x@example.com")
    states = {state.name: state for state in queue_control.states()}
    assert states["default"].waiting_on == ["concurrency limit (1 running)"]
    assert states["default"].keys_at_limit == {"k": "concurrency limit (1 running)"}
    assert states["emails"].waiting_on == ["paused"]
    assert states["default"].limits == "1 running; per key: 1 running"


@pytest.mark.not_mariadb  # its claim is a transaction of three statements (a Stepped)
def test_unlimited_claims_stay_one_statement(django_assert_num_queries):
    jobs = Job.objects.bulk_enqueue(add.prepare(i, i) for i in range(3))
    controls = read_controls(Queue, "default")
    with django_assert_num_queries(1):
        assert len(Job.objects.claim(None, "w", limit=5, controls=controls)) == len(jobs)


BACKLOG = 100_000


@pytest.mark.postgresql
def test_a_limited_backlog_of_100k_jobs_is_never_read_by_a_claim(analyzed):
    """The plans of issue 16: a key at its limit with 100,000 ready jobs in front, and another
    queue's claim next to it; no claim reads more than a few rows."""
    from django_sqlqueue.db import ops

    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_sqlqueue_job (task_name, queue, payload, priority, "
            "concurrency_key) SELECT 'add', 'limited', '{}', 5, 'big' "
            "FROM generate_series(1, %s)", [BACKLOG])
    add.using(queue="limited", concurrency_key="small").enqueue(1, 1)
    add.using(queue="limited").enqueue(1, 1)
    add.enqueue(1, 1)
    analyzed()
    now = timezone.now()
    # The per-key claim with "big" at its limit: the unkeyed part and the part of "small".
    nodes, most = explain(*ops(connection).ready_ids_by_key(
        Job, queue="limited", wanted={"": 5, "small": 5}, now=now))
    assert most <= 10, nodes  # at most 5 rows of each of the two keys
    assert {n.get("Index Name") for n in nodes if "Index Name" in n} == {
        "sqlqueue_job_ready_by_key"}
    assert not any(n["Node Type"] == "Sort" for n in nodes), nodes  # read in index order
    # Finding the ready keys: one probe per key, not 100,000 rows.
    nodes, most = explain(*ops(connection).ready_keys(Job, queue="limited", limit=400))
    assert most <= 5, nodes
    # Finding the ready queues (a worker of every queue, when some are limited or paused).
    nodes, most = explain(*ops(connection).ready_queues(Job, limit=10_000))
    assert most <= 5, nodes
    # The claim of an unlimited queue next to the backlog.
    nodes, most = explain(*ops(connection).ready_ids(Job, queues=["default"], limit=10, now=now))
    assert most <= 5, nodes
    queue_control.set_limits("limited", key_concurrency_limit=0)
    claimed = Job.objects.claim(None, "w", limit=10)  # the unkeyed job and "default"'s
    assert sorted(job.concurrency_key or "" for job in claimed) == ["", ""]


@pytest.mark.parametrize("change", [
    lambda: queue_control.pause("emails", by="ops"),
    lambda: queue_control.set_limits("emails", concurrency_limit=2),
    lambda: queue_control.set_fair("emails"),
], ids=["pause", "set_limits", "set_fair"])
def test_a_queue_change_waits_its_turn_behind_another_writer_on_sqlite(change):
    # Each reads the queue's row, then writes it: in SQLite's deferred transactions (Django's
    # default) that upgrade failed at once with "database is locked" while a worker wrote
    # (CI: pausing a queue beside two running workers). They take the write lock first.
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's locking; runs in the sqlite pass")
    assert errors_behind_another_writer(change) == []
    assert Queue.objects.filter(name="emails").exists()
