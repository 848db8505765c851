"""The worker's job threads: how many jobs a worker holds, and what happens to the ones it
claimed ahead of its threads."""

import time

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.pool import SHORT_JOB_SECONDS, Pool
from tests.testapp.tasks import add, sleep_for

pytestmark = pytest.mark.django_db(transaction=True)


def _pool(size):
    pool = Pool(size, alias="default", default_timeout=None, on_slot_free=lambda: None)
    pool.start()
    return pool


def _wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_claims_ahead_only_while_recent_jobs_were_short():
    pool = _pool(2)
    try:
        assert pool.free_slots() == 2  # nothing known about job durations yet: the threads only
        for n in range(4):
            add.enqueue(n, n)
        for job in Job.objects.claim(None, "w", limit=4):
            pool.submit(job)
        _wait_until(pool.is_idle)
        assert pool.mean_duration < SHORT_JOB_SECONDS
        assert pool.free_slots() > 2  # short jobs: room to claim ahead of the threads
        sleep_for.enqueue(0.3)
        for job in Job.objects.claim(None, "w", limit=1):
            pool.submit(job)
        _wait_until(pool.is_idle)
        pool.mean_duration = 1.0  # as after a run of long jobs
        assert pool.free_slots() == 2
    finally:
        pool.stop(wait=10)


def test_a_job_claimed_ahead_that_waits_too_long_is_withdrawn_and_never_run():
    pool = _pool(1)
    try:
        sleep_for.enqueue(0.5, tag="long")
        add.enqueue(1, 2)
        long_job, waiting = Job.objects.claim(None, "w", limit=2)
        pool.submit(long_job)
        pool.submit(waiting)  # claimed ahead: the only thread is busy with the long job
        _wait_until(lambda: [e.job.pk for e in pool.busy() if e.started_at] == [long_job.pk])
        assert pool.take_waiting(longer_than=60) == []  # not waiting that long yet
        withdrawn = pool.take_waiting(longer_than=0)
        assert [job.pk for job in withdrawn] == [waiting.pk]
        assert withdrawn[0].release()  # what the worker does with it
        _wait_until(pool.is_idle)
        assert pool.jobs_done == 1  # the thread skipped the withdrawn job
        assert Job.objects.get(pk=waiting.pk).status == JobStatus.QUEUED
        assert Job.objects.get(pk=long_job.pk).status == JobStatus.SUCCEEDED
    finally:
        pool.stop(wait=10)
