"""A job that raises a BaseException that is not an Exception (KeyboardInterrupt, GeneratorExit)
ends like any failure: final with its error, the worker keeps every slot, and it stops at once."""

import signal

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.process.conftest import job_status
from tests.support.waiting import wait_until
from tests.testapp.tasks import add, raises_keyboard_interrupt

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_job_raising_keyboard_interrupt_fails_and_the_worker_keeps_its_slot(start_worker):
    bad = raises_keyboard_interrupt.enqueue()
    # One thread: had the job's exception ended it, no later job could run. A shutdown timeout
    # longer than the test's wait: a job left "running" would hold the shutdown that long.
    worker = start_worker("-c", "1", "--shutdown-timeout", "3600",
                          settings={"POLL_INTERVAL_SECONDS": 0.2})
    wait_until(lambda: job_status(bad.pk) == JobStatus.EXHAUSTED, what="the job to fail",
               worker=worker)
    (error,) = Job.objects.get(pk=bad.pk).errors
    assert error["type"] == "builtins.KeyboardInterrupt"
    assert error["message"] == "raised by the job" and "KeyboardInterrupt" in error["traceback"]
    after = add.enqueue(2, 3)
    wait_until(lambda: job_status(after.pk) == JobStatus.SUCCEEDED, what="a job after it",
               worker=worker)
    assert Job.objects.get(pk=after.pk).result == 5
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=120) == 0, worker.output
    assert "waiting up to" not in worker.output  # nothing was left running
