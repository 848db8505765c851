"""Cancelling running jobs under a real ``runworker``: a job that loops in Python and checks the
flag, one blocked in C code (``time.sleep``) that ignores it, and an async one, each end
``cancelled`` within the documented time (docs/operations.md: one heartbeat interval to learn
of it, or at once through NOTIFY on PostgreSQL, plus CANCEL_GRACE_SECONDS for a job that does
not stop), and the worker keeps serving other jobs."""

import signal
import time

import pytest
from django.db import connection

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.statuses import JobStatus
from tests.process.conftest import job_status
from tests.support.waiting import wait_started, wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import add, async_sleep, loop_until_cancelled, sleep_in_c

pytestmark = pytest.mark.django_db(transaction=True)
LEASE, GRACE = 3.0, 1.0
HEARTBEAT = LEASE / 3
SETTINGS = {"LEASE_SECONDS": LEASE, "CANCEL_GRACE_SECONDS": GRACE,
            "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.2}
#: The machine is shared and small: the documented times plus a generous margin.
SLACK = 10.0


def cancel_and_time(job, worker, *, bound):
    """Cancel ``job`` from code; seconds until it is ``cancelled`` (at most ``bound``)."""
    asked = time.monotonic()
    assert Job.objects.get(pk=job.pk).cancel(by="ops@example.com") is True
    # A request, recorded at once; the worker stops the job (with NOTIFY it may already have).
    assert Job.objects.get(pk=job.pk).cancel_requested_at is not None
    wait_until(lambda: job_status(job.pk) == JobStatus.CANCELLED, timeout=bound,
               what=f"job {job.pk} cancelled", worker=worker)
    return time.monotonic() - asked


def cancelled_entry(job):
    row = Job.objects.get(pk=job.pk)
    assert row.cancelled_by == "ops@example.com" and row.cancel_requested_at is not None
    assert row.errors[-1]["type"] == "django_sqlqueue.exceptions.JobCancelled"
    assert "cancelled by ops@example.com" in row.errors[-1]["message"]
    return row.errors[-1]


def test_loop_c_sleep_and_async_jobs_end_cancelled_and_the_worker_keeps_serving(start_worker):
    looping = loop_until_cancelled.enqueue()
    sleeping = sleep_in_c.enqueue(60)
    awaiting = async_sleep.enqueue(60)
    worker = start_worker("-c", "4", settings=SETTINGS)
    for job in (looping, sleeping, awaiting):
        wait_started(job.pk, worker)

    # The cooperative loop and the async task stop as soon as the worker learns of it.
    for job in (looping, awaiting):
        took = cancel_and_time(job, worker, bound=HEARTBEAT + SLACK)
        print(f"job {job.task_name} cancelled in {took:.2f}s")
        assert "did not stop" not in cancelled_entry(job)["message"]
    # time.sleep cannot be interrupted: given up on after the grace period, thread abandoned.
    took = cancel_and_time(sleeping, worker, bound=HEARTBEAT + GRACE + SLACK)
    print(f"job {sleeping.task_name} cancelled in {took:.2f}s")
    assert took >= GRACE
    assert f"did not stop within {GRACE:g}s" in cancelled_entry(sleeping)["message"]

    # The worker goes on: new jobs run on the free threads, cancelled ones never again.
    more = [add.enqueue(n, n) for n in range(3)]
    wait_until(lambda: all(job_status(j.pk) == JobStatus.SUCCEEDED for j in more),
               what="jobs after the cancels", worker=worker)
    assert worker.is_running() and Worker.objects.filter(pid=worker.pid).exists()
    for job in (looping, sleeping, awaiting):
        row = Job.objects.get(pk=job.pk)
        assert (row.status, row.attempts) == (JobStatus.CANCELLED, 1)
        assert Execution.objects.filter(job_id=job.pk, tag="started").count() == 1
    assert "job cancel requested" in worker.output
    worker.signal(signal.SIGTERM)
    # The abandoned thread is still in time.sleep: the worker does not wait for it.
    assert worker.wait(timeout=30) == 0, worker.output
    assert "6 job(s) finished (3 succeeded, 3 cancelled)" in worker.output


def test_with_processes_a_job_ignoring_the_cancel_gets_its_child_replaced(start_worker):
    sleeping = sleep_in_c.enqueue(60)
    worker = start_worker("-p", "2", settings=SETTINGS)
    wait_started(sleeping.pk, worker)
    cancel_and_time(sleeping, worker, bound=HEARTBEAT + GRACE + SLACK)
    wait_until(lambda: "recycling: job" in worker.output
               and worker.output.count("started, pid") >= 3,
               what="a replacement child", worker=worker)
    assert f"job {sleeping.pk} was cancelled and its thread cannot be stopped" in worker.output
    after = add.enqueue(2, 3)
    wait_until(lambda: job_status(after.pk) == JobStatus.SUCCEEDED, what="a job after it",
               worker=worker)
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, worker.output


@pytest.mark.skipif(connection.vendor != "postgresql", reason="LISTEN/NOTIFY is PostgreSQL's")
def test_on_postgresql_the_worker_learns_at_once_through_notify(start_worker):
    # A heartbeat every 20 s: only the NOTIFY can explain a cancel within a few seconds.
    looping = loop_until_cancelled.enqueue()
    worker = start_worker(settings={**SETTINGS, "LEASE_SECONDS": 60})
    wait_started(looping.pk, worker)
    took = cancel_and_time(looping, worker, bound=15)
    print(f"cancelled through NOTIFY in {took:.2f}s")
    assert took < 15
