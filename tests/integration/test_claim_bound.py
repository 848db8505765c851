"""The bounded claim (claim/bounded.py): jobs after a position in claim order only, and
what it keeps of claim order: exact while claims are quick, within the full-claim interval when
they are slow."""

import datetime as dt
import io

import pytest
from django.utils import timezone

from django_sqlqueue.claim.bounded import FULL_CLAIM_COST_FACTOR, SLOW_IN_A_ROW, ClaimBound
from django_sqlqueue.models import Job
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db(transaction=True)


def position(job):
    return (job.priority, job.run_at, job.pk)


def test_a_bounded_claim_takes_the_jobs_after_its_position_in_claim_order():
    past = timezone.now() - dt.timedelta(seconds=10)
    high = add.using(priority=5).enqueue(0, 0)
    first, second, third = (add.enqueue(n, n) for n in range(3))
    low = add.using(priority=-5).enqueue(9, 9)
    # Enqueued last, but its run_at is in the past: sorted before ``second``.
    early = add.using(run_at=past).enqueue(7, 7)
    claimed = Job.objects.claim(None, "w1", limit=10, after=position(second))
    # After (0, second's run_at, second's id): the rest of priority 0, then the lower ones.
    assert [job.pk for job in claimed] == [third.pk, low.pk]
    assert set(Job.objects.ready().values_list("pk", flat=True)) == {
        high.pk, first.pk, second.pk, early.pk}


def test_a_bounded_claim_fills_its_limit_in_claim_order_and_serves_queue_lists():
    jobs = [add.using(queue=queue).enqueue(n, n) for n in range(4) for queue in ("a", "b")]
    claimed = Job.objects.claim(["a"], "w1", limit=2, after=position(jobs[0]))
    assert [job.pk for job in claimed] == [jobs[2].pk, jobs[4].pk]
    claimed = Job.objects.claim(["a", "b"], "w1", limit=10, after=position(jobs[4]))
    assert [job.pk for job in claimed] == [jobs[5].pk, jobs[6].pk, jobs[7].pk]


def test_with_quick_claims_the_order_is_exact():
    bound = ClaimBound(slow_claim_seconds=0.02, full_claim_interval_seconds=1.0)
    for n in range(3):
        add.enqueue(n, n)
    jobs = Job.objects.claim(None, "w1", limit=1, after=bound.bound(0.0))
    bound.claimed(jobs, bounded=False, seconds=0.001, now=0.0)
    urgent = add.using(priority=9).enqueue(1, 1)  # sorted before the job just claimed
    assert bound.bound(0.1) is None  # quick: the next claim is a full one ...
    [job] = Job.objects.claim(None, "w1", limit=1, after=bound.bound(0.1))
    assert job.pk == urgent.pk  # ... and the higher priority is claimed at once
    assert bound.seconds_until_full(0.1) is None  # and the worker's wait is not cut


def test_with_slow_claims_a_job_behind_the_bound_waits_at_most_the_full_claim_interval():
    bound = ClaimBound(slow_claim_seconds=0.02, full_claim_interval_seconds=1.0)
    normal = [add.enqueue(n, n) for n in range(4)]
    for _ in range(SLOW_IN_A_ROW - 1):  # slow full claims that found nothing yet
        bound.claimed([], bounded=False, seconds=0.03, now=0.0)
        assert bound.bound(0.0) is None  # not slow enough times in a row yet
    jobs = Job.objects.claim(None, "w1", limit=1, after=bound.bound(0.0))
    bound.claimed(jobs, bounded=False, seconds=0.03, now=0.0)  # one more slow full claim
    urgent = add.using(priority=9).enqueue(1, 1)
    retry_due = add.using(run_at=timezone.now() - dt.timedelta(minutes=1)).enqueue(2, 2)
    assert bound.bound(0.3) == position(normal[0])
    assert bound.seconds_until_full(0.3) == pytest.approx(0.7)
    # Bounded: the next jobs after the last claimed, not those sorted before it.
    jobs = Job.objects.claim(None, "w1", limit=1, after=bound.bound(0.3))
    assert [job.pk for job in jobs] == [normal[1].pk]
    bound.claimed(jobs, bounded=True, seconds=0.001, now=0.3)
    assert bound.bound(0.9) == position(normal[1])  # moves on with each claim
    # A bounded claim that comes back short does not end it: only the interval does.
    bound.claimed([], bounded=True, seconds=0.001, now=0.9)
    assert bound.bound(0.99) == position(normal[1])
    # At the interval: a full claim, which takes the jobs sorted before the bound first.
    assert bound.bound(1.0) is None
    jobs = Job.objects.claim(None, "w1", limit=2, after=bound.bound(1.0))
    assert [job.pk for job in jobs] == [urgent.pk, retry_due.pk]
    bound.claimed(jobs, bounded=False, seconds=0.001, now=1.0)  # quick again: exact order
    assert bound.bound(1.1) is None and bound.seconds_until_full(1.1) is None


def test_full_claims_slower_than_a_twentieth_of_the_interval_come_less_often():
    bound = ClaimBound(slow_claim_seconds=0.02, full_claim_interval_seconds=1.0)
    add.enqueue(1, 1)
    jobs = Job.objects.claim(None, "w1", limit=1)
    for _ in range(SLOW_IN_A_ROW):  # behind a long transaction: 0.4 s each
        bound.claimed(jobs, bounded=False, seconds=0.4, now=0.0)
    # Once a second, they would take 40% of the worker's time: 20 x 0.4 s apart instead.
    assert bound.full_claim_every() == pytest.approx(FULL_CLAIM_COST_FACTOR * 0.4)
    assert bound.bound(7.9) is not None and bound.bound(8.0) is None
    assert bound.seconds_until_full(2.0) == pytest.approx(6.0)


def test_bounded_claims_turned_off_are_never_used():
    bound = ClaimBound(slow_claim_seconds=None, full_claim_interval_seconds=1.0)
    add.enqueue(1, 1)
    jobs = Job.objects.claim(None, "w1", limit=1)
    bound.claimed(jobs, bounded=False, seconds=10.0, now=0.0)
    assert bound.bound(0.1) is None and bound.seconds_until_full(0.1) is None


def _explain(cursor, statement, params):
    """EXPLAIN (ANALYZE, BUFFERS) of the claim's read: its plan as text and the buffers it
    touched."""
    cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params)
    plan = cursor.fetchone()[0][0]["Plan"]
    buffers = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    cursor.execute("EXPLAIN " + statement, params)
    return "\n".join(row[0] for row in cursor.fetchall()), buffers


@pytest.mark.postgresql
def test_behind_a_held_snapshot_the_bounded_claim_skips_what_was_claimed_since():
    import psycopg
    from django.db import connection

    from django_sqlqueue.db import ops
    from tests.conftest import direct_connect_kwargs

    insert = ("INSERT INTO django_sqlqueue_job (task_name, queue, payload) "
              "SELECT 'tests.testapp.tasks.add', 'default', '{\"args\": [1, 2]}' "
              "FROM generate_series(1, %s)")
    with connection.cursor() as cursor:
        cursor.execute(insert, [20_000])
        cursor.execute("ANALYZE django_sqlqueue_job")
    held = psycopg.connect(**direct_connect_kwargs())  # a report's transaction, left open
    try:
        held.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        held.execute("SELECT txid_current(), count(*) FROM django_sqlqueue_job")
        # 20,000 jobs claimed and finished behind its snapshot, then new ones enqueued.
        claimed = []
        while len(claimed) < 20_000:
            claimed += Job.objects.claim(None, "w1", limit=1000)
        Job.objects.filter(pk__in=[job.pk for job in claimed]).update(status="succeeded")
        with connection.cursor() as cursor:
            cursor.execute(insert, [100])
            full_sql, params = ops(connection).ready_ids(Job, limit=10)
            full_plan, full_buffers = _explain(cursor, full_sql, params)
            last = max(claimed, key=lambda job: (-job.priority, job.run_at, job.pk))
            after = (0, last.run_at, last.pk)
            bounded_sql, params = ops(connection).ready_ids_after(Job, after=after, limit=10)
            bounded_plan, bounded_buffers = _explain(cursor, bounded_sql, params)
    finally:
        held.close()
    # Both read the ready index in claim order, without a sort; the bounded one starts its
    # range at the bound (the row comparison is an index condition, not a filter).
    assert "Sort" not in full_plan and "Sort" not in bounded_plan, bounded_plan
    assert bounded_plan.count("Index Scan using sqlqueue_job_ready_any_queue") == 2, bounded_plan
    [starts_at_bound] = [line for line in bounded_plan.splitlines() if "(priority = 0)" in line]
    assert "Index Cond:" in starts_at_bound and "ROW(run_at, id) > ROW(" in starts_at_bound
    # The full read visits the table for each of the 20,000 entries the snapshot keeps (well
    # over 100 pages); the bounded one, a few pages.
    assert full_buffers > 100, full_plan
    assert bounded_buffers * 10 < full_buffers, (bounded_buffers, full_buffers)


def _claiming_worker(monkeypatch, settings, slow_claim_seconds):
    from django_sqlqueue.worker.config import WorkerConfig
    from django_sqlqueue.worker.process import WorkerProcess

    settings.SQLQUEUE = {**settings.SQLQUEUE, "SLOW_CLAIM_SECONDS": slow_claim_seconds,
                         "FULL_CLAIM_INTERVAL_SECONDS": 60}
    process = WorkerProcess(WorkerConfig(name="t", poll_interval=0.05), out=io.StringIO())
    monkeypatch.setattr(process.pool, "free_slots", lambda: 1)  # one job per claim
    return process


def _claimed_by_next_step(process):
    process.fetcher.step()  # the pool's threads are not started: the job stays held, not run
    return Job.objects.filter(status="running").order_by("-claimed_at", "-pk").first()


def test_a_worker_whose_full_claim_was_slow_claims_after_its_last_job(monkeypatch, settings):
    process = _claiming_worker(monkeypatch, settings, slow_claim_seconds=0)  # any is slow
    normal = [add.enqueue(n, n) for n in range(SLOW_IN_A_ROW + 1)]
    for job in normal[:SLOW_IN_A_ROW]:
        assert _claimed_by_next_step(process).pk == job.pk  # full claims, slow
    urgent = add.using(priority=5).enqueue(1, 1)
    assert _claimed_by_next_step(process).pk == normal[-1].pk  # bounded: after the last
    process.fetcher.claim_bound.last_full_at -= 60  # the full-claim interval has passed
    assert _claimed_by_next_step(process).pk == urgent.pk


def test_a_worker_whose_claims_are_quick_claims_in_exact_order(monkeypatch, settings):
    process = _claiming_worker(monkeypatch, settings, slow_claim_seconds=10)
    normal = [add.enqueue(n, n) for n in range(SLOW_IN_A_ROW + 1)]
    for job in normal[:SLOW_IN_A_ROW]:
        assert _claimed_by_next_step(process).pk == job.pk
    urgent = add.using(priority=5).enqueue(1, 1)
    assert _claimed_by_next_step(process).pk == urgent.pk
