"""snapshot.take(): per queue the jobs by state (scheduled apart from due), lag, live workers and
throughput over 1 h, 24 h and 7 d; and the rollup that keeps throughput cheap
(worker/maintenance/rollup.py), whose numbers must be the same as counting the job table."""

import datetime as dt

import pytest
from django.db import connection

from django_sqlqueue.models import Job, ThroughputCount, ThroughputCursor
from django_sqlqueue.observability import snapshot
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.maintenance.rollup import Rollup, RollupConfig
from django_sqlqueue.worker.maintenance.service import Maintenance
from django_sqlqueue.worker.maintenance.steps import InvalidStepConfig
from tests.factories import JobFactory, WorkerFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2030, 1, 8, 12, 30, 20, tzinfo=dt.UTC)


def ago(**delta):
    return NOW - dt.timedelta(**delta)


def by_name(snap):
    return {queue.name: queue for queue in snap.queues}


def test_states_scheduled_apart_from_due_and_the_lag():
    JobFactory.create_batch(2, run_at=ago(seconds=90), enqueued_at=ago(minutes=5))
    JobFactory(run_at=ago(minutes=-10), enqueued_at=ago(minutes=1))  # due in ten minutes
    JobFactory(failed=True, run_at=ago(minutes=-1), enqueued_at=ago(minutes=5))
    JobFactory(running=True, run_at=ago(seconds=5), queue="emails")
    JobFactory(succeeded=True, run_at=ago(minutes=3), queue="emails")
    JobFactory(exhausted=True, run_at=ago(minutes=3), queue="emails")
    JobFactory(cancelled=True, run_at=ago(minutes=3))
    JobFactory(expired=True, run_at=ago(minutes=3))
    JobFactory(stale=True, run_at=ago(hours=1), queue="old")  # past expires_at: never due
    JobFactory(status=JobStatus.WAITING, run_at=ago(minutes=3))  # a workflow's, never due
    queues = by_name(snapshot.take(now=NOW))
    default = queues["default"]
    assert default.counts == {"queued": 2, "scheduled": 1, "waiting": 1, "running": 0,
                              "succeeded": 0,
                              "failed": 1, "exhausted": 0, "cancelled": 1, "expired": 1}
    assert default.lag_seconds == pytest.approx(90)
    assert default.oldest_due_at == ago(seconds=90)
    emails = queues["emails"]
    assert (emails.counts["running"], emails.counts["succeeded"],
            emails.counts["exhausted"]) == (1, 1, 1)
    assert emails.lag_seconds is None and not emails.unserved
    assert queues["old"].counts["queued"] == 1 and queues["old"].lag_seconds is None


def test_a_due_queue_without_a_live_worker_is_unserved():
    JobFactory(queue="emails", run_at=ago(minutes=2))
    JobFactory(queue="reports", run_at=ago(minutes=2))
    WorkerFactory(queues=["reports"], last_heartbeat_at=ago(seconds=1))
    WorkerFactory(queues=["emails"], last_heartbeat_at=ago(hours=1))  # presumed dead
    snap = snapshot.take(now=NOW)
    queues = by_name(snap)
    assert queues["emails"].unserved and queues["emails"].live_workers == 0
    assert not queues["reports"].unserved and queues["reports"].live_workers == 1
    assert [w.state for w in snap.workers] == ["alive", "presumed dead"]
    assert len(snap.live_workers) == 1


def finish_history():
    """Jobs that ended at known times, over two queues and two tasks."""
    plan = [  # (how long ago, status, queue, task, jobs)
        (dt.timedelta(seconds=10), "succeeded", "default", "a", 3),  # this minute
        (dt.timedelta(minutes=2), "exhausted", "default", "a", 2),
        (dt.timedelta(minutes=59), "succeeded", "default", "b", 1),  # first minute of the hour
        (dt.timedelta(minutes=61), "succeeded", "default", "b", 4),  # before it
        (dt.timedelta(hours=5), "cancelled", "emails", "a", 1),
        (dt.timedelta(hours=30), "succeeded", "emails", "a", 6),
        (dt.timedelta(days=6), "expired", "emails", "b", 2),
        (dt.timedelta(days=8), "succeeded", "emails", "b", 7),  # beyond a week
    ]
    for before, status, queue, task, n in plan:
        JobFactory.create_batch(n, task_name=task, queue=queue, run_at=NOW - before,
                                **{status: True})


def finished(succeeded=0, exhausted=0, cancelled=0, expired=0):
    return {"succeeded": succeeded, "exhausted": exhausted, "cancelled": cancelled,
            "expired": expired}


EXPECTED = {
    "default": {"1h": finished(4, 2), "24h": finished(8, 2), "7d": finished(8, 2)},
    "emails": {"1h": finished(), "24h": finished(cancelled=1),
               "7d": finished(6, cancelled=1, expired=2)},
}


def test_throughput_windows_from_the_job_table():
    finish_history()
    snap = snapshot.take(now=NOW)
    queues = by_name(snap)
    assert {name: q.throughput for name, q in queues.items()} == EXPECTED
    assert snap.current_minute_seconds == 20  # NOW is 12:30:20
    minutes = queues["default"].per_minute
    assert len(minutes) == 60
    assert minutes[-1] == [3, 0] and minutes[-3] == [0, 2] and minutes[0] == [1, 0]
    assert queues["default"].per_minute_rate(5) == pytest.approx(2 / 5)
    # With the current minute so far: its 3 jobs count, over half a minute more.
    assert queues["default"].per_minute_rate(5, 30) == pytest.approx((2 + 3) / 5.5)


def test_rolled_up_throughput_is_the_same_and_outlives_pruning():
    finish_history()
    result = Rollup(alias="default").run_once(NOW)
    assert result.done and result.rolled_up_to == dt.datetime(2030, 1, 8, 12, 29, tzinfo=dt.UTC)
    # Everything but the last minute and a half (the rollup's delay: the 3 jobs of this minute)
    # and what is older than a week is in the rollup.
    assert result.jobs == 2 + 1 + 4 + 1 + 6 + 2
    snap = snapshot.take(now=NOW)
    assert snap.rolled_up_to == result.rolled_up_to
    assert {q.name: q.throughput for q in snap.queues} == EXPECTED
    # The rolled-up minutes no longer need their jobs.
    assert Job.objects.filter(finished_at__lt=ago(minutes=1, seconds=20)).delete()[0] == 23
    queues = by_name(snapshot.take(now=NOW))
    assert {name: q.throughput for name, q in queues.items()} == EXPECTED
    assert queues["default"].per_minute[-3] == [0, 2]


def test_rollup_counts_each_job_once_across_runs_and_processes():
    finish_history()
    first, second = Rollup(alias="default"), Rollup(alias="default")
    assert first.run_once(NOW - dt.timedelta(minutes=30)).jobs == 1 + 4 + 1 + 6 + 2
    assert second.run_once(NOW - dt.timedelta(minutes=30)).jobs == 0  # the cursor moved
    assert second.run_once(NOW).jobs == 2  # up to the rollup's delay
    assert first.run_once(NOW).jobs == 0
    snap = snapshot.take(now=NOW)
    assert {q.name: q.throughput for q in snap.queues} == EXPECTED
    hours = ThroughputCount.objects.filter(period_seconds=ThroughputCount.HOUR)
    assert sum(hours.values_list("count", flat=True)) == 2 + 1 + 4 + 1 + 6 + 2


def test_rollup_works_through_a_backlog_in_spans_and_forgets_old_buckets():
    finish_history()
    rollup = Rollup(RollupConfig(span_seconds=3600, run_spans=24), alias="default")
    first = rollup.run_once(NOW)
    assert not first.done  # a week back is 168 spans of an hour
    while not rollup.run_once(NOW).done:
        pass
    snap = snapshot.take(now=NOW)
    assert {q.name: q.throughput for q in snap.queues} == EXPECTED
    later = NOW + dt.timedelta(days=9)
    Rollup(alias="default").run_once(later)
    assert not ThroughputCount.objects.filter(bucket_at__lt=later - dt.timedelta(days=8)).exists()
    assert ThroughputCursor.objects.get().rolled_up_to == dt.datetime(
        2030, 1, 17, 12, 29, tzinfo=dt.UTC)


@pytest.mark.postgresql
def test_final_states_are_estimated_from_a_sample_on_a_big_table(monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite counts exactly")
    JobFactory.create_batch(30, succeeded=True, run_at=ago(hours=2))
    JobFactory.create_batch(5, exhausted=True, run_at=ago(hours=2), queue="emails")
    JobFactory.create_batch(4, run_at=ago(minutes=1))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_sqlqueue_job")
    monkeypatch.setattr(snapshot, "EXACT_LIMIT", 10)  # the table is "big"
    monkeypatch.setattr(snapshot, "SAMPLE_ROWS", 10_000)  # a sample of every page
    snap = snapshot.take(now=NOW)
    assert snap.estimated == ("succeeded", "exhausted", "cancelled", "expired")
    queues = by_name(snap)
    assert queues["default"].counts["succeeded"] == 30
    assert queues["emails"].counts["exhausted"] == 5
    assert queues["default"].counts["queued"] == 4  # few are waiting: exact
    assert queues["default"].lag_seconds == pytest.approx(60)


@pytest.mark.postgresql
def test_a_big_backlog_is_estimated_too(monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite counts exactly")
    JobFactory.create_batch(30, run_at=ago(minutes=1))
    JobFactory.create_batch(12, run_at=ago(minutes=-5), queue="emails")  # scheduled
    JobFactory.create_batch(3, failed=True, run_at=ago(minutes=-1), queue="emails")
    JobFactory(run_at=ago(minutes=9), queue="emails")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_sqlqueue_job")
    monkeypatch.setattr(snapshot, "EXACT_LIMIT", 10)
    monkeypatch.setattr(snapshot, "SAMPLE_ROWS", 10_000)
    snap = snapshot.take(now=NOW)
    assert snap.estimated == ("queued", "scheduled", "failed", "succeeded", "exhausted",
                              "cancelled", "expired")
    queues = by_name(snap)
    assert queues["default"].counts["queued"] == 30
    assert (queues["emails"].counts["queued"], queues["emails"].counts["scheduled"],
            queues["emails"].counts["failed"]) == (1, 12, 3)
    assert queues["emails"].lag_seconds == pytest.approx(9 * 60)
    assert snap.as_json()["estimated"][:3] == ["queued", "scheduled", "failed"]


def test_json_document():
    JobFactory(run_at=ago(minutes=2))
    WorkerFactory(queues=[], last_heartbeat_at=ago(seconds=2), name="web-1:1:x")
    document = snapshot.take(now=NOW).as_json()
    assert document["taken_at"] == NOW.isoformat() and document["estimated"] == []
    (queue,) = document["queues"]
    assert queue["name"] == "default" and queue["counts"]["queued"] == 1
    assert queue["lag_seconds"] == 120.0 and queue["live_workers"] == 1
    assert queue["throughput"] == {"1h": finished(), "24h": finished(), "7d": finished()}
    assert document["workers"][0]["name"] == "web-1:1:x"
    assert document["workers"][0]["state"] == "alive"


def test_rollup_writes_many_buckets_in_several_statements(monkeypatch):
    monkeypatch.setattr("django_sqlqueue.worker.maintenance.rollup.ROWS_PER_STATEMENT", 3)
    finish_history()
    Rollup(alias="default").run_once(NOW)
    assert {q.name: q.throughput for q in snapshot.take(now=NOW).queues} == EXPECTED
    assert ThroughputCount.objects.count() > 3


@pytest.mark.parametrize("field", ["delay_seconds", "span_seconds", "run_spans"])
def test_rollup_config_is_checked(field):
    with pytest.raises(InvalidStepConfig, match=f"RollupConfig: {field} must be more than 0"):
        RollupConfig(**{field: 0})


def test_the_maintenance_leader_rolls_up_and_others_do_not():
    finish_history()
    leader = Maintenance(alias="default", lease_seconds=30, keep_succeeded=None,
                         keep_failed=None, worker_id="leader")
    other = Maintenance(alias="default", lease_seconds=30, keep_succeeded=None,
                        keep_failed=None, worker_id="other")
    assert leader.run_once(NOW).leading and not other.run_once(NOW).leading
    assert ThroughputCursor.objects.get().rolled_up_to == dt.datetime(
        2030, 1, 8, 12, 29, tzinfo=dt.UTC)
    assert {q.name: q.throughput for q in snapshot.take(now=NOW).queues} == EXPECTED
