"""Fair shares between the keys of a queue (claim/fair.py, docs/fairness.md), one claim at a
time, on the real database: shares in proportion to the weights, an idle key's share going to
the others, fair shares with per-key limits, and the controls. Real workers are in
tests/process/test_fairness_workers.py."""

import threading
from collections import Counter

import pytest
from django.db import connection, connections

from django_sqlqueue.claim import fair
from django_sqlqueue.claim.limited import read_controls
from django_sqlqueue.exceptions import InvalidQueueLimit
from django_sqlqueue.models import Job, Queue
from django_sqlqueue.queues import control
from django_sqlqueue.statuses import JobStatus
from tests.support.claims import claim
from tests.support.plans import explain
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def level_start():
    """Each test's claims start with every key level: the bookkeeping is this process's."""
    fair.forget()


def backlog(key, count, **options):
    task = add.using(concurrency_key=key or None, **options)  # None: no key
    Job.objects.bulk_enqueue(task.prepare(n, n) for n in range(count))


def keys_of(jobs) -> Counter:
    return Counter(job.concurrency_key or "" for job in jobs)


def test_claims_share_the_jobs_between_keys_by_their_weights():
    control.set_fair("default", weights={"gold": 3, "": 2})
    for key in ("gold", "silver", ""):  # silver weighs 1; "" is the jobs without a key
        backlog(key, 400)
    taken = Counter()
    for _ in range(60):
        taken += keys_of(claim("default", 6))  # 360 jobs: none of the backlogs runs out
    # Deterministic: every claim of 6 is one full rotation, 3 + 1 + 2.
    assert taken == {"gold": 180, "silver": 60, "": 120}


def test_shares_hold_over_claims_of_any_size():
    control.set_fair("default")
    for key in ("a", "b", "c"):
        backlog(key, 300)
    taken = Counter()
    for size in [1, 2, 5, 7, 4] * 20:  # 380 jobs
        taken += keys_of(claim("default", size))
    assert max(taken.values()) - min(taken.values()) <= 1, taken


def test_a_backlog_does_not_delay_another_keys_jobs():
    control.set_fair("default")
    backlog("big", 500, priority=5)  # first in plain claim order: enqueued first, higher priority
    backlog("small", 3)
    first = claim("default", 6)
    assert keys_of(first) == {"big": 3, "small": 3}
    # Within a key, claim order: "big"'s first three.
    big = Job.objects.filter(concurrency_key="big").order_by("pk").values_list("pk", flat=True)
    assert sorted(job.pk for job in first if job.concurrency_key == "big") == list(big[:3])


def test_an_idle_keys_share_goes_to_the_others():
    control.set_fair("default")
    backlog("a", 200)
    backlog("b", 5)
    assert keys_of(claim("default", 20)) == {"a": 15, "b": 5}  # b had only 5: a gets the rest
    assert keys_of(claim("default", 20)) == {"a": 20}  # b idle: a gets every slot
    for _ in range(5):
        claim("default", 10)
    # b comes back with a backlog: its share from now on, not the turns it missed.
    backlog("b", 50)
    assert keys_of(claim("default", 10)) == {"a": 5, "b": 5}


def test_a_new_key_beside_a_key_alone_with_a_backlog_waits_one_claim_at_most():
    control.set_fair("default")
    backlog("a", 100)
    # One key, a full claim: the next skips the scan.
    assert keys_of(claim("default", 10)) == {"a": 10}
    backlog("b", 5)
    assert keys_of(claim("default", 10)) == {"a": 10}  # b is not looked for...
    assert keys_of(claim("default", 10)) == {"a": 5, "b": 5}  # ...until this one: its share at once


def test_jobs_not_due_yet_do_not_take_a_share():
    import datetime as dt

    from django.utils import timezone
    control.set_fair("default")
    backlog("a", 50)
    backlog("later", 50, run_at=timezone.now() + dt.timedelta(hours=1))
    assert keys_of(claim("default", 10)) == {"a": 10}


def test_fair_shares_keep_per_key_limits():
    control.set_fair("default")
    control.set_limits("default", key_concurrency_limit=2)
    backlog("a", 50)
    backlog("b", 50)
    backlog("", 50)  # per-key limits do not bind the jobs without a key
    assert keys_of(claim("default", 10)) == {"a": 2, "b": 2, "": 6}
    assert keys_of(claim("default", 10)) == {"": 10}


def test_fair_queues_are_claimed_under_the_controls_and_plain_ones_as_before():
    assert read_controls(Queue, "default").unused
    control.set_fair("default", weights={"a": 2})
    controls = read_controls(Queue, "default")
    # Without limits, claimed side by side, not in turns on the row.
    assert controls.fair == {"default": {"a": 2}} and not controls.limited
    assert not controls.unused and "default" in controls.held_back()
    backlog("a", 3)
    add.using(queue="other").enqueue(1, 1)
    claimed = Job.objects.claim(None, "w", limit=10, controls=controls)
    assert Counter(job.queue for job in claimed) == {"default": 3, "other": 1}
    control.set_limits("default", concurrency_limit=10)
    controls = read_controls(Queue, "default")
    assert controls.limited == {"default"} and not controls.fair
    control.set_limits("default", concurrency_limit=None)
    control.set_fair("default", False)
    assert read_controls(Queue, "default").unused


def test_a_queue_made_fair_again_starts_with_every_key_level():
    control.set_fair("default")
    backlog("a", 50)
    backlog("b", 50)
    assert keys_of(claim("default", 3)) == {"a": 2, "b": 1}  # a first on ties: a slot ahead now
    control.set_fair("default", False)
    read_controls(Queue, "default")  # as each worker reads the Queue table
    control.set_fair("default")
    assert keys_of(claim("default", 1)) == {"a": 1}  # level again: a first (with a's lead kept: b)


def test_weights_are_kept_until_changed_and_shown():
    control.set_fair("default", weights={"gold": 3, "": 0.5})
    row = control.set_fair("default")  # weights=None keeps them
    assert row.key_weights == {"gold": 3, "": 0.5}
    assert row.describe_limits() == "fair shares per key (weights (no key)=0.5, gold=3)"
    row = control.set_fair("default", weights={})
    assert row.key_weights == {} and row.describe_limits() == "fair shares per key"


@pytest.mark.parametrize("weights", [{"a": 0}, {"a": -1}, {"a": "3"}, {"a": True}, ["a"],
                                     {"a": float("inf")}, {1: 2}])
def test_bad_weights_are_refused_with_the_fix(weights):
    with pytest.raises(InvalidQueueLimit, match="weight"):
        control.set_fair("default", weights=weights)
    assert not Queue.objects.filter(name="default").exists()


def test_a_fair_claim_sets_each_job_running_once():
    control.set_fair("default")
    backlog("a", 30)
    backlog("b", 30)
    first = Job.objects.claim(["default"], "w1", limit=25)
    second = Job.objects.claim(["default"], "w2", limit=50)
    assert len(first) == 25 and len(second) == 35
    assert not {job.pk for job in first} & {job.pk for job in second}
    assert Job.objects.filter(status=JobStatus.RUNNING).count() == 60
    assert connection.vendor  # the same on every database


@pytest.mark.server_database
def test_fair_claims_side_by_side_pass_over_the_rows_another_holds():
    """Fair claims run side by side (no turns on the queue's row): one that finds a key's jobs
    locked by another transaction (another claim's) takes other rows, without waiting."""
    control.set_fair("default")
    backlog("a", 20)
    backlog("b", 2)
    held = list(Job.objects.filter(concurrency_key="b").values_list("pk", flat=True))
    holder = connections.create_connection("default")
    holder.connect()
    holder.set_autocommit(False)
    claimed = []

    def other_claim():
        try:
            claimed.extend(claim("default", 4))
        finally:
            connection.close()
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT id FROM django_sqlqueue_job WHERE id IN (%s, %s) "
                           "FOR UPDATE", held)
        thread = threading.Thread(target=other_claim)
        thread.start()
        thread.join(timeout=60)
        assert not thread.is_alive(), "the claim waited for rows another transaction holds"
    finally:
        holder.rollback()
        holder.close()
    thread.join()
    assert keys_of(claimed) == {"a": 4}  # b's slots went to a
    assert keys_of(claim("default", 4)) == {"b": 2, "a": 2}


@pytest.mark.postgresql
def test_a_fair_claim_visits_each_key_once_and_never_reads_a_backlog(analyzed):
    """A key with 100,000 ready jobs and ten keys with a few: finding the keys is one index
    probe each, and each key's read stops after its share, from its own index range, with no
    sort."""
    from django.utils import timezone

    from django_sqlqueue.db import ops

    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_sqlqueue_job (task_name, queue, payload, concurrency_key) "
            "SELECT 'add', 'default', '{}', 'big' FROM generate_series(1, 100000)")
    for n in range(10):
        backlog(f"small-{n}", 3)
    backlog("", 3)
    analyzed()
    nodes, most = explain(*ops(connection).ready_keys(Job, queue="default", unkeyed=True,
                                                      limit=10_000))
    assert most <= 15, nodes  # 12 keys, one probe each (and the last, empty one)
    wanted = {"big": 5, "small-3": 5, "": 5}
    nodes, most = explain(*ops(connection).ready_ids_by_key(
        Job, queue="default", wanted=wanted, now=timezone.now()))
    assert most <= 15, nodes  # at most 5 rows of each key
    assert {n.get("Index Name") for n in nodes if "Index Name" in n} == {
        "sqlqueue_job_ready_by_key"}
    assert not any(n["Node Type"] == "Sort" for n in nodes), nodes
    # The fair claim's own read: the same, each key's rows locked as they are read.
    nodes, most = explain(*ops(connection).claimable_ids_by_key(Job, queue="default",
                                                                wanted=wanted))
    assert most <= 15, nodes
    assert any(n["Node Type"] == "LockRows" for n in nodes), nodes
    assert {n.get("Index Name") for n in nodes if "Index Name" in n} == {
        "sqlqueue_job_ready_by_key"}
    assert not any(n["Node Type"] == "Sort" for n in nodes), nodes
    control.set_fair("default")
    assert keys_of(claim("default", 12)) == {key: 1 for key in ["big", "", *(f"small-{n}" for n in
                                                                  range(10))]}


@pytest.fixture
def small_windows(monkeypatch):
    """Claims look at 3 keys at most (FAIR_KEYS_PER_CLAIM), as 1,000 do with more keys."""
    monkeypatch.setattr("django_sqlqueue.claim.fair.FAIR_KEYS_PER_CLAIM", 3)


def test_with_more_keys_than_one_claim_looks_at_the_windows_take_turns(small_windows):
    control.set_fair("default")
    keys = [f"k{n}" for n in range(7)]
    for key in keys:
        backlog(key, 30)
    taken = Counter()
    for _ in range(21):  # 42 jobs: 6 a key if fair
        taken += keys_of(claim("default", 2))
    assert set(taken) == set(keys)
    assert max(taken.values()) - min(taken.values()) <= 2, taken


def test_a_window_without_due_jobs_does_not_hold_the_claim_back(small_windows):
    import datetime as dt

    from django.utils import timezone
    control.set_fair("default")
    for key in ("a", "b", "c"):  # the first window: nothing due
        backlog(key, 5, run_at=timezone.now() + dt.timedelta(hours=1))
    backlog("d", 5)
    backlog("e", 5)
    assert keys_of(claim("default", 4)) == {"d": 2, "e": 2}  # the first window gave none: the next
    second = keys_of(claim("default", 4))  # windows [b, c, d] then [e, a]: weighted in each
    assert second.total() == 4 and set(second) == {"d", "e"}, second


def test_keys_that_differ_only_in_case_are_claimed_on_every_database():
    # Two keys on PostgreSQL and SQLite; one under MariaDB's case-insensitive collation.
    control.set_fair("default")
    backlog("tenant", 4)
    backlog("TENANT", 4)
    claimed = claim("default", 5) + claim("default", 5)
    assert len(claimed) == 8 and keys_of(claimed) == {"tenant": 4, "TENANT": 4}
