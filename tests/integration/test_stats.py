"""Job.objects.stats(): counts per queue and status, and how far behind each queue is."""

import datetime as dt

import pytest

from django_sqlqueue.models import Job
from tests.factories import JobFactory, claimed_job

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.timezone.utc)


def at(seconds):
    return T0 + dt.timedelta(seconds=seconds)


def test_no_jobs_no_stats():
    assert Job.objects.stats(now=T0) == {}


def test_counts_per_queue_and_status():
    JobFactory.create_batch(2, run_at=at(-5))
    JobFactory(failed=True, run_at=at(-5))
    JobFactory(running=True, run_at=at(-5))
    JobFactory(succeeded=True, queue="emails")
    JobFactory.create_batch(3, exhausted=True, queue="emails")
    JobFactory(cancelled=True, queue="reports")
    JobFactory(expired=True, queue="reports")
    stats = Job.objects.stats(now=T0)
    assert list(stats) == ["default", "emails", "reports"]  # sorted by queue name
    assert stats["default"].queue == "default"
    assert stats["default"].counts == {"queued": 2, "failed": 1, "running": 1}
    assert stats["default"].waiting == 3
    assert stats["emails"].counts == {"succeeded": 1, "exhausted": 3}
    assert stats["reports"].counts == {"cancelled": 1, "expired": 1}
    assert stats["emails"].waiting == stats["reports"].waiting == 0


def test_counts_follow_the_jobs_through_their_lifecycle():
    job = claimed_job(run_at=T0, now=T0)
    assert Job.objects.stats(now=T0)["default"].counts == {"running": 1}
    job.fail(RuntimeError("x"), now=at(1))
    assert Job.objects.stats(now=at(1))["default"].counts == {"failed": 1}
    job = Job.objects.claim(now=at(100))[0]
    job.complete(None, now=at(101))
    assert Job.objects.stats(now=at(101))["default"].counts == {"succeeded": 1}


def test_lag_is_the_wait_of_the_oldest_ready_job():
    JobFactory(run_at=at(-30))
    JobFactory(failed=True, run_at=at(-10))
    # None of these is ready, so none of them counts for the lag:
    JobFactory(running=True, run_at=at(-100))
    JobFactory(cancelled=True, run_at=at(-200))
    JobFactory(succeeded=True, run_at=at(-300))
    JobFactory(stale=True, run_at=at(-400))  # past its expires_at: will never run
    JobFactory(run_at=at(60))  # not due yet
    stats = Job.objects.stats(now=T0)["default"]
    assert stats.oldest_ready_at == at(-30)
    assert stats.lag_seconds == pytest.approx(30.0)
    later = Job.objects.stats(now=at(90))["default"]
    assert later.oldest_ready_at == at(-30)
    assert later.lag_seconds == pytest.approx(120.0)


def test_failed_job_due_for_retry_counts_for_the_lag():
    JobFactory(failed=True, run_at=at(-45))
    JobFactory(run_at=at(-5))
    assert Job.objects.stats(now=T0)["default"].lag_seconds == pytest.approx(45.0)


def test_lag_per_queue_and_none_without_ready_jobs():
    JobFactory(run_at=at(-30), queue="a")
    JobFactory(run_at=at(-2), queue="b")
    JobFactory(run_at=at(10), queue="c")  # only a future job
    JobFactory(running=True, run_at=at(-50), queue="d")
    stats = Job.objects.stats(now=T0)
    assert stats["a"].lag_seconds == pytest.approx(30.0)
    assert stats["b"].lag_seconds == pytest.approx(2.0)
    assert (stats["c"].lag_seconds, stats["c"].oldest_ready_at) == (None, None)
    assert stats["c"].counts == {"queued": 1} and stats["c"].waiting == 1
    assert (stats["d"].lag_seconds, stats["d"].oldest_ready_at) == (None, None)


def test_job_due_exactly_now_has_zero_lag():
    JobFactory(run_at=T0)
    assert Job.objects.stats(now=T0)["default"].lag_seconds == 0.0


def test_stats_of_a_filtered_queryset_count_only_its_jobs():
    JobFactory(run_at=at(-60), task_name="tests.record")
    JobFactory(run_at=at(-10))
    JobFactory(run_at=at(-5), queue="emails")
    stats = Job.objects.filter(task_name="tests.testapp.tasks.add").stats(now=T0)
    assert stats["default"].counts == {"queued": 1}
    assert stats["default"].lag_seconds == pytest.approx(10.0)
    assert list(Job.objects.in_queues(["emails"]).stats(now=T0)) == ["emails"]
