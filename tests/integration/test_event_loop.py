"""The worker's event loop (worker/event_loop.py) in-process, with a real database: async jobs
run there many at once beside the threads, a claim asks for each kind of slot by the recent mix,
time limits cancel the task, and signal receivers and the ORM work from async jobs (nothing
synchronous touches the database on the loop)."""

import pytest

from django_sqlqueue import signals
from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.pool import Pool
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import add, async_nap, async_sleeps_then_records

pytestmark = pytest.mark.django_db(transaction=True)


def _pool(size, async_size, **options):
    pool = Pool(size, alias="default", default_timeout=None, on_slot_free=lambda: None,
                async_size=async_size, **options)
    pool.start()
    return pool


def _run(pool, jobs):
    for job in Job.objects.claim(None, "w", limit=len(jobs)):
        pool.submit(job)
    wait_until(pool.is_idle, what="the pool to run the jobs")


def test_a_claim_asks_for_each_kind_of_slot_by_the_recent_mix():
    pool = Pool(2, alias="default", default_timeout=None, on_slot_free=lambda: None,
                async_size=40)  # not started: only its counts
    assert pool.free_slots() == 2  # no async job seen yet: the threads, as without a loop
    pool.async_share = 1.0  # only async jobs lately: the async slots
    assert pool.free_slots() == 40
    pool.async_share = 0.99  # nearly: the async slots, and a thread for a sync job
    assert pool.free_slots() == 1 + 40
    pool.async_share = 0.5
    assert pool.free_slots() == 1 + 20
    without = Pool(2, alias="default", default_timeout=None, on_slot_free=lambda: None)
    assert without.free_slots() == 2 and without.loop is None  # no loop: as before


def test_async_jobs_run_at_once_on_the_loop_while_the_one_thread_runs_sync_jobs():
    pool = _pool(1, 30)
    try:
        # Each of the first jobs waits until 25 are in flight: one thread never gets there.
        jobs = [async_nap.enqueue(0.05, crowd=25) for _ in range(30)] + [add.enqueue(1, 2)]
        pool.async_share = 1.0  # as after a run of async jobs
        _run(pool, jobs)
    finally:
        pool.stop(wait=10)
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == 31
    seen = [int(tag) for tag in Execution.objects.values_list("tag", flat=True)]
    assert len(seen) == 30 and 25 <= max(seen) <= 30
    assert pool.jobs_done == 31 and pool.free_slots() > 0


def test_signal_receivers_and_the_orm_work_from_a_job_on_the_loop():
    seen = []

    def finished(sender, job, outcome, **kwargs):
        # A receiver using the sync ORM: it runs on the ORM thread, not on the loop (where
        # Django would raise SynchronousOnlyOperation).
        Execution.objects.create(job_id=job.pk, attempt=job.attempts, worker="", tag="signal")
        seen.append(str(outcome))

    signals.job_finished.connect(finished)
    pool = _pool(1, 5)
    try:
        job = async_nap.enqueue(0.01, tag="ran")
        _run(pool, [job])
    finally:
        pool.stop(wait=10)
        signals.job_finished.disconnect(finished)
    assert seen == ["succeeded"]
    assert sorted(Execution.objects.filter(job_id=job.pk).values_list("tag", flat=True)) \
        == ["ran", "signal"]
    assert Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED


def test_a_time_limit_on_the_loop_fails_the_job_and_cancels_its_task():
    pool = _pool(1, 5)
    pool.default_timeout = 0.5
    try:
        job = async_sleeps_then_records.using(max_attempts=1).enqueue(120)
        for claimed in Job.objects.claim(None, "w", limit=1):
            pool.submit(claimed)
        wait_until(lambda: Job.objects.get(pk=job.pk).status == JobStatus.EXHAUSTED,
                   what="the time limit")
        wait_until(lambda: Execution.objects.filter(job_id=job.pk, tag="cancelled").exists(),
                   what="CancelledError at the job's await")
        wait_until(pool.is_idle, what="the slot to be free")
    finally:
        pool.stop(wait=10)
    assert Job.objects.get(pk=job.pk).errors[-1]["type"].endswith(".JobTimeout")


def test_a_job_that_cannot_be_loaded_runs_on_a_thread_and_fails_as_before():
    job = async_nap.enqueue(0.01)
    Job.objects.filter(pk=job.pk).update(task_name="tests.not_registered")
    pool = _pool(1, 5)
    try:
        _run(pool, [job])
    finally:
        pool.stop(wait=10)
    row = Job.objects.get(pk=job.pk)
    assert row.errors[-1]["type"] == "django_sqlqueue.exceptions.UnknownTask"
    assert pool.async_share == 0  # not counted as an async job
