"""The worker's job threads: how many jobs a worker holds, and what happens to the ones it
claimed ahead of its threads."""

import threading

import pytest

from django_sqlqueue import runner
from django_sqlqueue.models import Job
from django_sqlqueue.runner import Outcome, OutcomeKind
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.heartbeat import JobTimeout
from django_sqlqueue.worker.pool import SHORT_JOB_SECONDS, Pool
from tests.support.waiting import wait_until
from tests.testapp.tasks import add, record, sleep_for

pytestmark = pytest.mark.django_db(transaction=True)


def _pool(size):
    pool = Pool(size, alias="default", default_timeout=None, on_slot_free=lambda: None)
    pool.start()
    return pool


def test_claims_ahead_only_while_recent_jobs_were_short():
    pool = _pool(2)
    try:
        assert pool.free_slots() == 2  # nothing known about job durations yet: the threads only
        for n in range(4):
            add.enqueue(n, n)
        for job in Job.objects.claim(None, "w", limit=4):
            pool.submit(job)
        wait_until(pool.is_idle, what="the pool to run the short jobs")
        assert pool.mean_duration < SHORT_JOB_SECONDS
        assert pool.free_slots() > 2  # short jobs: room to claim ahead of the threads
        sleep_for.enqueue(0.3)
        for job in Job.objects.claim(None, "w", limit=1):
            pool.submit(job)
        wait_until(pool.is_idle, what="the pool to run the long job")
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
        wait_until(lambda: [e.job.pk for e in pool.busy() if e.started_at] == [long_job.pk],
                   what="the long job to start, alone")
        assert pool.take_waiting(longer_than=60) == []  # not waiting that long yet
        withdrawn = pool.take_waiting(longer_than=0)
        assert [job.pk for job in withdrawn] == [waiting.pk]
        assert withdrawn[0].release()  # what the worker does with it
        wait_until(pool.is_idle, what="the pool to be idle")
        assert pool.jobs_done == 1  # the thread skipped the withdrawn job
        assert Job.objects.get(pk=waiting.pk).status == JobStatus.QUEUED
        assert Job.objects.get(pk=long_job.pk).status == JobStatus.SUCCEEDED
    finally:
        pool.stop(wait=10)


def test_a_job_that_timed_out_and_runs_again_keeps_its_new_claim_held(monkeypatch):
    # The heartbeat failed the first attempt past its timeout (its thread cannot be stopped), the
    # retry was claimed at once and runs on the other thread. When the stuck thread returns, only
    # its own claim is let go: the retry stays held, its lease renewed, until its outcome is
    # written.
    job = record.enqueue(tag="twice")
    gates = {1: threading.Event(), 2: threading.Event()}
    run = runner.run

    def gated_run(job):
        assert gates[job.attempts].wait(60)
        return run(job)

    monkeypatch.setattr(runner, "run", gated_run)
    results = []
    pool = Pool(2, alias="default", default_timeout=None, on_slot_free=lambda: None,
                on_result=results.append)
    pool.start()
    try:
        (first,) = Job.objects.claim(None, "w", limit=1)
        pool.submit(first)
        wait_until(lambda: all(entry.started_at for entry in pool.held()),
                   what="the first attempt to start")
        (stuck,) = pool.held()
        pool.time_out(stuck, Outcome(OutcomeKind.FAILED, error=JobTimeout("too long"), delay=0))
        (second,) = Job.objects.claim(None, "w", limit=1)  # the retry, at once
        assert second.pk == first.pk and second.attempts == 2
        pool.submit(second)
        wait_until(lambda: any(e.job is second and e.started_at for e in pool.held()),
                   what="the retry to start")
        gates[1].set()  # the stuck thread returns; its late outcome is dropped
        wait_until(lambda: stuck.ran, what="the stuck thread to return")
        assert [entry.job for entry in pool.held()] == [second]
        assert pool.free_slots() == pool.capacity() - 1
        gates[2].set()
        wait_until(pool.is_idle, what="the retry to finish")
    finally:
        for gate in gates.values():
            gate.set()
        pool.stop(wait=10)
    assert Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED
    assert [(r.job.attempts, r.outcome) for r in results] == [(1, "failed"), (2, "succeeded")]
    assert pool.unwritten() == 0
    assert pool.free_slots() == pool.capacity()


def test_at_shutdown_only_the_current_claim_of_a_job_is_taken_for_release():
    pool = Pool(1, alias="default", default_timeout=None, on_slot_free=lambda: None)  # no thread
    add.enqueue(1, 2)
    (withdrawn,) = Job.objects.claim(None, "w", limit=1)
    pool.submit(withdrawn)
    assert pool.take_waiting(longer_than=0) == [withdrawn]
    assert withdrawn.release()
    (again,) = Job.objects.claim(None, "w", limit=1)  # the same job, claimed again
    pool.submit(again)
    taken = pool.take_unstarted()
    assert len(taken) == 1 and taken[0] is again  # the withdrawn claim is already released
    assert pool.is_idle()
