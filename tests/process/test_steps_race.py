"""A worker that lost its lease cannot record a step twice (docs/steps.md): racing real worker
processes, the frozen one's step rolls back its write and returns the step's recorded result.

Worker A starts the step and is frozen (SIGSTOP) before the step's write; its lease runs out,
worker B takes the job over and completes it, step and all. Then A is let go: its step writes
its row and fails to record the step (B did), so its transaction rolls back; it returns B's
recorded result, and its outcome write is fenced off. One row in the end, whatever the timing:
the gate, not a clock, orders the two runs."""

import signal
from pathlib import Path

import pytest

from django_sqlqueue.models import Job, JobStep
from django_sqlqueue.statuses import JobStatus
from tests.process.conftest import job_status
from tests.support.waiting import wait_until
from tests.testapp.models import Order
from tests.testapp.step_tasks import executions, frozen_step

pytestmark = pytest.mark.django_db(transaction=True)

SETTINGS = {"LEASE_SECONDS": 3, "MAINTENANCE_INTERVAL_SECONDS": 0.5,
            "POLL_INTERVAL_SECONDS": 0.2}


def test_a_worker_that_lost_its_lease_rolls_back_its_step_and_returns_the_recorded(
        start_worker, tmp_path):
    job = frozen_step.enqueue(str(tmp_path))
    frozen = start_worker("--no-scheduler", settings=SETTINGS)
    wait_until(lambda: executions(tmp_path, "frozen") == 1, what="the step to start",
               worker=frozen, timeout=120)
    frozen.signal(signal.SIGSTOP)
    try:
        rescuer = start_worker("--no-scheduler", settings=SETTINGS)
        wait_until(lambda: job_status(job.pk) == JobStatus.SUCCEEDED,
                   what="the rescue to run the job", worker=rescuer, timeout=180)
    finally:
        Path(tmp_path, "gate").touch()
        frozen.signal(signal.SIGCONT)
    job.refresh_from_db()
    (rescuer_pid, _) = job.result
    assert rescuer_pid == rescuer.pid
    wait_until(lambda: executions(tmp_path, f"after-{rescuer.pid}") == 2,
               what="the frozen worker's step to return the recorded result",
               worker=[frozen, rescuer], timeout=120)

    assert executions(tmp_path, "frozen") == 2  # both ran the function...
    assert list(Order.objects.values_list("total", flat=True)) == [rescuer.pid]  # ...one wrote
    assert list(JobStep.objects.filter(job_id=job.pk).values_list("result", flat=True)) == [
        rescuer.pid]
    job.refresh_from_db()  # the frozen worker's outcome write was fenced off
    assert (job.status, job.result) == (JobStatus.SUCCEEDED, [rescuer.pid, rescuer.pid])
    assert Job.objects.count() == 1
