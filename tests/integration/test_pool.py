"""The worker's job threads: how many jobs a worker holds, and what happens to the ones it
claimed ahead of its threads."""

import threading
import uuid

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.run import runner
from django_sqlqueue.run.runner import Outcome, OutcomeKind
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.heartbeat import JobTimeout
from django_sqlqueue.worker.pool import SHORT_JOB_SECONDS, Pool
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
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


#: What a failover to an asynchronous standby leaves of a claim the old primary acknowledged
#: but never sent: the job ready again on the new primary, or already claimed there by another
#: worker (under a token of its own).
LOST_CLAIMS = {
    "ready again": {"status": JobStatus.QUEUED, "claimed_by": None, "claim_token": None,
                    "lease_expires_at": None},
    "claimed by another worker": {"claimed_by": "other", "claim_token": uuid.uuid4()},
}


@pytest.mark.parametrize("lost_as", list(LOST_CLAIMS))
def test_held_jobs_whose_claims_were_lost_in_an_outage_are_dropped_not_run(monkeypatch, lost_as):
    # The only thread is busy; two jobs claimed ahead wait for it. During the "outage" (the
    # gate closed, as a job's interrupted run closes it), the database loses one of the two
    # claims. Once the database answers, the pool reads its claims back before the next job:
    # the lost one is dropped, never started (the other worker's run is the only one), and the
    # kept one runs. Before the read-back, the thread ran both: two runs of one job at once.
    release = threading.Event()
    run = runner.run

    def busy_until_released(job):
        if job.payload["kwargs"]["tag"] == "busy":
            assert release.wait(60)
        return run(job)

    monkeypatch.setattr(runner, "run", busy_until_released)
    slots_freed = []
    pool = Pool(1, alias="default", default_timeout=None, worker_id="w",
                on_slot_free=lambda: slots_freed.append(1))
    pool.start()
    try:
        busy, lost, kept = (record.enqueue(tag=tag) for tag in ("busy", "lost", "kept"))
        claimed = Job.objects.claim(None, "w", limit=3)
        assert [job.pk for job in claimed] == [busy.pk, lost.pk, kept.pk]
        for job in claimed:
            pool.submit(job)
        wait_until(lambda: [e.job.pk for e in pool.held() if e.started_at] == [busy.pk],
                   what="the busy job to start, alone")
        Job.objects.filter(pk=lost.pk).update(**LOST_CLAIMS[lost_as])
        pool.gate.close("a simulated failover")
        release.set()
        wait_until(pool.is_idle, what="the pool to be idle")
    finally:
        release.set()
        pool.stop(wait=10)
    assert sorted(Execution.objects.values_list("tag", flat=True)) == ["busy", "kept"]
    assert Job.objects.get(pk=kept.pk).status == JobStatus.SUCCEEDED
    # The lost job is left as the database has it: not this worker's to finish or release.
    left = Job.objects.get(pk=lost.pk)
    assert {name: getattr(left, name) for name in LOST_CLAIMS[lost_as]} == LOST_CLAIMS[lost_as]
    assert pool.jobs_done == 2 and slots_freed


def test_held_claims_are_read_back_once_per_trouble():
    # No thread: the reading itself. Nothing is dropped while the database agrees, and a
    # trouble count already read back costs no second reading.
    pool = Pool(1, alias="default", default_timeout=None, worker_id="w", on_slot_free=lambda: None)
    add.enqueue(1, 2)
    (job,) = Job.objects.claim(None, "w", limit=1)
    pool.submit(job)
    pool.gate.suspect()
    assert pool.lost_claims.drop(pool.gate.trouble) == []
    Job.objects.filter(pk=job.pk).update(claim_token=uuid.uuid4())  # lost after that reading
    assert pool.lost_claims.drop(pool.gate.trouble) == []  # this trouble was read back already
    pool.gate.suspect()
    assert pool.lost_claims.drop(pool.gate.trouble) == [job]
    assert pool.is_idle()
