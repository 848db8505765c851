"""Async jobs on the worker's event loop, under a real ``runworker``: thousands at once on one
process with two threads, each run exactly once, while sync jobs keep to the threads; time
limits and cancels end the job's task at its next await; a job that blocks the loop is named in
a warning; a worker killed mid-run loses nothing.

Limits are reached by construction (jobs that wait for each other and record what they saw), not
by timing: the assertions are counts."""

import signal
from collections import Counter

import pytest
from django.db.models import Count

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.statuses import JobStatus
from tests.process.conftest import job_status
from tests.support.waiting import wait_started, wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import (
    async_blocks_loop,
    async_nap,
    async_sleeps_then_records,
    sync_pair,
)

pytestmark = pytest.mark.django_db(transaction=True)
SETTINGS = {"LEASE_SECONDS": 3, "CANCEL_GRACE_SECONDS": 1, "MAINTENANCE_INTERVAL_SECONDS": 0.5,
            "POLL_INTERVAL_SECONDS": 0.2}


def all_succeeded(jobs) -> bool:
    pks = [job.pk for job in jobs]
    return Job.objects.filter(pk__in=pks, status=JobStatus.SUCCEEDED).count() == len(pks)


@pytest.mark.timeout(900)
def test_thousands_of_async_jobs_run_at_once_beside_the_thread_limit_of_sync_jobs(start_worker):
    # 2,000 async jobs that each await 100 ms, and sync jobs that each wait for a second sync
    # job beside them: one worker, two threads, 100 async slots.
    naps = Job.objects.bulk_enqueue([async_nap.prepare(0.1, crowd=50) for _ in range(2000)])
    pairs = Job.objects.bulk_enqueue([sync_pair.prepare() for _ in range(20)])
    # The default lease: on SQLite, thousands of short writes from one process can keep a
    # heartbeat waiting for the write lock longer than a test's 3 s lease.
    worker = start_worker("--concurrency", "2", "--async-concurrency", "100",
                          settings={"POLL_INTERVAL_SECONDS": 0.2})
    wait_until(lambda: all_succeeded(naps + pairs), timeout=600, interval=0.5,
               what="every job to succeed", worker=worker)

    # Each async job recorded exactly once (one Execution per job, none lost or doubled).
    per_job = Counter(Execution.objects.filter(job_id__in=[j.pk for j in naps])
                      .values_list("job_id", flat=True))
    assert len(per_job) == 2000 and set(per_job.values()) == {1}
    # The first of them waited until 50 were in flight at once, which two threads never reach;
    # none ever saw more than the 100 async slots.
    seen = [int(tag) for tag in Execution.objects.filter(job_id__in=[j.pk for j in naps])
            .values_list("tag", flat=True)]
    assert 50 <= max(seen) <= 100
    # Sync jobs ran on the two threads: two at once (each waited for a peer), never three.
    tags = Counter(Execution.objects.filter(job_id__in=[j.pk for j in pairs])
                   .values_list("tag", flat=True))
    assert sum(tags.values()) == 20 and max(int(t.split(":")[1]) for t in tags) == 2, tags
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, worker.output


def test_a_time_limit_cancels_the_task_at_its_await_and_frees_the_slot(start_worker):
    slow = async_sleeps_then_records.using(timeout=1, max_attempts=1).enqueue(120)
    worker = start_worker("--async-concurrency", "1", settings=SETTINGS)
    wait_until(lambda: job_status(slow.pk) == JobStatus.EXHAUSTED, what="the timeout",
               worker=worker)
    row = Job.objects.get(pk=slow.pk)
    assert row.errors[-1]["type"] == "django_sqlqueue.worker.heartbeat.JobTimeout"
    # Its task got CancelledError at its await (and recorded it), and the one async slot is
    # free again: the next async job runs on this same worker.
    wait_until(lambda: Execution.objects.filter(job_id=slow.pk, tag="cancelled").exists(),
               what="the task to be cancelled", worker=worker)
    after = async_nap.enqueue(0.01, tag="after")
    wait_until(lambda: job_status(after.pk) == JobStatus.SUCCEEDED, what="the next async job",
               worker=worker)
    assert worker.is_running() and "job timed out" in worker.output


def test_a_cancel_ends_the_task_at_its_await_and_the_worker_keeps_serving(start_worker):
    awaiting = async_sleeps_then_records.enqueue(120)
    # A long grace: the job's CancelledError handler writes a row, which may wait on a busy
    # machine; the cancel itself must not need the grace ("did not stop" below).
    worker = start_worker("--async-concurrency", "1",
                          settings={**SETTINGS, "CANCEL_GRACE_SECONDS": 60})
    wait_started(awaiting.pk, worker)
    assert Job.objects.get(pk=awaiting.pk).cancel(by="ops@example.com") is True
    wait_until(lambda: job_status(awaiting.pk) == JobStatus.CANCELLED, what="the cancel",
               worker=worker)
    row = Job.objects.get(pk=awaiting.pk)
    assert "did not stop" not in row.errors[-1]["message"]  # stopped at once, not given up on
    assert Execution.objects.filter(job_id=awaiting.pk, tag="cancelled").count() == 1
    after = async_nap.enqueue(0.01, tag="after")
    wait_until(lambda: job_status(after.pk) == JobStatus.SUCCEEDED, what="the next async job",
               worker=worker)
    assert worker.is_running() and Worker.objects.filter(pid=worker.pid).exists()


def test_a_job_that_blocks_the_loop_is_named_with_how_long_it_blocked(start_worker):
    blocking = async_blocks_loop.enqueue(1.5)
    worker = start_worker(settings={**SETTINGS, "ASYNC_BLOCK_WARNING_SECONDS": 0.3})
    wait_until(lambda: job_status(blocking.pk) == JobStatus.SUCCEEDED, what="the job",
               worker=worker)
    named = f"task=tests.async_blocks_loop id={blocking.pk}"
    wait_until(lambda: f"async job blocked the event loop {named} blocked_ms=" in worker.output,
               what="the warning after the block", worker=worker)
    assert f"async job is blocking the event loop {named}" in worker.output
    line = next(line for line in worker.output.splitlines()
                if f"async job blocked the event loop {named}" in line)
    blocked_ms = int(line.split("blocked_ms=")[1].split(":")[0])
    assert blocked_ms >= 1000  # it slept 1.5 s on the loop's thread


@pytest.mark.timeout(600)
def test_a_worker_killed_mid_run_loses_no_async_job(start_worker):
    naps = Job.objects.bulk_enqueue([async_nap.prepare(1.0) for _ in range(300)])
    first = start_worker("--concurrency", "2", "--async-concurrency", "50", settings=SETTINGS)
    # Killed once some jobs are done and others are in flight (50 at a time, 1 s each).
    wait_until(lambda: Execution.objects.filter(job_id__in=[j.pk for j in naps]).count() >= 20,
               what="some jobs to finish", worker=first)
    first.stop()  # SIGKILL: no shutdown, its held jobs keep their leases until they run out
    second = start_worker("--concurrency", "2", settings=SETTINGS)
    wait_until(lambda: all_succeeded(naps), timeout=300, interval=0.5,
               what="the second worker to finish every job", worker=second)
    pks = [j.pk for j in naps]
    # Nothing lost: every job ran to its end once at least; no claim ran twice.
    assert set(Execution.objects.filter(job_id__in=pks).values_list("job_id", flat=True)) \
        == set(pks)
    assert not (Execution.objects.filter(job_id__in=pks).values("job_id", "attempt")
                .annotate(n=Count("id")).filter(n__gt=1).exists())
    # The kill did land mid-run: the jobs it held were rescued as interruptions.
    assert Job.objects.filter(pk__in=pks, interruptions__gt=0).exists()
