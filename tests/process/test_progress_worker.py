"""Progress under a real ``runworker``: a job that reports tens of thousands of times a second
costs the database at most one write per PROGRESS_INTERVAL_SECONDS, the latest value is visible
while it runs, and the final one when it ends; async jobs on the event loop too.

The bound is by construction (the worker's progress thread writes once per interval, whatever
the rate of reports): the job counts the writes of its own process and the seconds it ran, and
a slow machine only makes fewer writes. The job runs until the test has seen its progress in the
database (a gate file), not for a fixed time."""

import pytest

from django_sqlqueue.models import Job
from tests.process.conftest import job_status
from tests.support.waiting import wait_until
from tests.testapp.tasks import async_progress, progress_burst

pytestmark = pytest.mark.django_db(transaction=True)
INTERVAL = 0.5
SETTINGS = {"POLL_INTERVAL_SECONDS": 0.2, "PROGRESS_INTERVAL_SECONDS": INTERVAL}


def test_tens_of_thousands_of_reports_cost_a_few_writes_a_second(start_worker, tmp_path):
    gate = tmp_path / "seen"
    job = progress_burst.enqueue(20_000, str(gate), 10**9)
    worker = start_worker("--concurrency", "1", settings=SETTINGS)

    def progress_while_running():
        row = Job.objects.get(pk=job.pk)
        return row.status == "running" and row.progress is not None and row.progress

    seen = wait_until(progress_while_running, timeout=120,
                      what="the running job's progress in its row", worker=worker)
    assert seen.total == 10**9 and seen.message == f"step {seen.done}"
    wait_until(lambda: Job.objects.get(pk=job.pk).progress.done > seen.done, timeout=120,
               what="a later value written while it runs", worker=worker)
    gate.touch()
    wait_until(lambda: job_status(job.pk) == "succeeded", timeout=120,
               what="the job to succeed", worker=worker)

    row = Job.objects.get(pk=job.pk)
    ran = row.result
    assert ran["reports"] >= 20_000
    # One UPDATE per interval at most (and one for a pass begun as the job started), however
    # many reports: here ~ten thousand or more per write.
    assert 2 <= ran["statements"] <= ran["seconds"] / INTERVAL + 2, ran
    assert ran["reports"] / ran["statements"] > 1_000, ran
    # The final value, written when the function returned, before the outcome.
    assert (row.progress.done, row.progress.message) == (ran["reports"],
                                                         f"step {ran['reports']}")


def test_an_async_job_on_the_event_loop_reports_its_progress(start_worker):
    job = async_progress.enqueue(300)
    worker = start_worker("--burst", "--async-concurrency", "10", settings=SETTINGS)
    assert worker.wait(timeout=120) == 0, worker.output
    row = Job.objects.get(pk=job.pk)
    assert row.status == "succeeded"
    assert (row.progress.done, row.progress.total, row.progress.message) == (300, 300, "async")
