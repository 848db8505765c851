"""Scenario 5, time, on both vendors: a job scheduled for later never starts before its run_at, and
a failed job never runs again before its retry delay. Lateness is bounded by the stated tolerance:
one poll interval plus scheduling noise, TOLERANCE seconds in all."""

import datetime as dt
import signal
import time

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.run.retry import retry_delay_seconds
from django_sqlqueue.statuses import JobStatus
from tests.chaos.conftest import elapsed, sized
from tests.support.waiting import wait_until
from tests.testapp.jobs import flaky, work
from tests.testapp.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

POLL = 0.2
# Seconds a job may start after it is due: the poll interval plus a loaded machine's noise.
# Early is the promise, and it holds by construction; late is the machine: CI, with three test
# passes on two cores, once started a retry 2.1 s after it was due (the bound was 1.5 s).
TOLERANCE = 4.0
SETTINGS = {"POLL_INTERVAL_SECONDS": POLL, "LEASE_SECONDS": 5, "MAINTENANCE_INTERVAL_SECONDS": 1}


def _ready_worker(start_worker):
    worker = start_worker("-c", "4", settings=SETTINGS)
    wait_until(lambda: "wake-up:" in worker.output, what="the worker's banner", worker=worker)
    return worker


def _stop(worker):
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output


def test_scheduled_jobs_never_start_before_their_run_at(start_worker, reliability):
    started = time.monotonic()
    worker = _ready_worker(start_worker)
    count = sized(40, 1000)
    horizon = sized(3.0, 60.0)
    jobs = [work.using(delay=0.2 + horizon * n / count).enqueue(key=str(n)) for n in range(count)]
    far = work.using(delay=3600).enqueue(key="far")
    wait_until(lambda: Job.objects.filter(status=JobStatus.SUCCEEDED).count() == count,
               timeout=horizon + 30, what="the scheduled jobs", worker=worker)
    _stop(worker)

    runs = {run.job_id: run for run in Run.objects.all()}
    early, late = [], []
    for job in Job.objects.filter(pk__in=[j.pk for j in jobs]):
        run = runs[job.pk]
        if job.claimed_at < job.run_at or run.started_at < job.run_at:
            early.append((job.pk, job.run_at, job.claimed_at, run.started_at))
        late.append((run.started_at - job.run_at).total_seconds())
    reliability("scheduled jobs", jobs=count, started_early=len(early),
                max_late_seconds=round(max(late), 3), tolerance_seconds=TOLERANCE,
                seconds=elapsed(started))
    assert not early, early
    assert max(late) <= TOLERANCE, sorted(late)[-5:]
    assert Job.objects.get(pk=far.pk).status == JobStatus.QUEUED  # due in an hour: untouched
    assert far.pk not in runs


def _delay_bounds(job, attempt):
    """The retry delay after ``attempt`` failed, at the two ends of the jitter."""
    policy = {
        "backoff": job.retry_backoff_seconds, "min_delay": job.retry_min_delay_seconds,
        "max_delay": job.retry_max_delay_seconds, "jitter": job.retry_jitter,
    }
    return (retry_delay_seconds(attempt, **policy, rand=lambda: 0.0),
            retry_delay_seconds(attempt, **policy, rand=lambda: 1.0))


def test_retry_delays_are_respected(start_worker, reliability):
    started = time.monotonic()
    worker = _ready_worker(start_worker)
    fails, count = 3, sized(8, 100)
    policy = {"retry_backoff": 0.3, "retry_min_delay": 0.3, "retry_max_delay": 1.0}
    jobs = [flaky.using(max_attempts=fails + 1, retry_jitter=jitter, **policy).enqueue(fails)
            for jitter in (0.0, 0.5) for _ in range(count // 2)]
    wait_until(lambda: Job.objects.filter(status=JobStatus.SUCCEEDED).count() == len(jobs),
               timeout=60, what="the retried jobs", worker=worker)
    _stop(worker)

    early, late = [], []
    for job in Job.objects.filter(pk__in=[j.pk for j in jobs]):
        starts = dict(Run.objects.filter(job_id=job.pk).values_list("attempt", "started_at"))
        assert sorted(starts) == list(range(1, fails + 2)), (job.pk, sorted(starts))
        for entry in job.errors:
            attempt = entry["attempt"]
            failed_at = dt.datetime.fromisoformat(entry["at"])
            waited = (starts[attempt + 1] - failed_at).total_seconds()
            low, high = _delay_bounds(job, attempt)
            if waited < low:
                early.append((job.pk, attempt, waited, low))
            late.append(waited - high)
    reliability("retry delays", jobs=len(jobs), retries=len(jobs) * fails,
                retried_early=len(early), max_late_seconds=round(max(late), 3),
                tolerance_seconds=TOLERANCE, seconds=elapsed(started))
    assert not early, early
    assert max(late) <= TOLERANCE, sorted(late)[-5:]
