"""``runworker --burst`` exits once nothing is left, even while a thread is stuck in a job that
ran past its time limit (issue 42): the job's outcome is written as timed out, the exit abandons
the thread, and the status lines say only what changed."""

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.testapp.models import Execution
from tests.testapp.tasks import add, sleep_in_c

pytestmark = pytest.mark.django_db(transaction=True)

LEASE = 3  # a heartbeat (which fails jobs past their timeout) every second


def test_burst_exits_abandoning_a_thread_stuck_past_its_time_limit(start_worker):
    stuck = sleep_in_c.using(timeout=2, max_attempts=1).enqueue(600)
    after = [add.enqueue(n, n) for n in range(3)]
    worker = start_worker("--burst", "-c", "2", settings={"LEASE_SECONDS": LEASE})
    # Before the fix it logged JobTimeout, then a progress line every 2 s, for ever.
    assert worker.wait(timeout=90) == 0, worker.output
    output = worker.output
    assert Execution.objects.filter(job_id=stuck.pk, tag="started").count() == 1
    row = Job.objects.get(pk=stuck.pk)
    assert row.status == JobStatus.EXHAUSTED, output
    assert row.errors[-1]["type"].endswith("JobTimeout"), row.errors
    assert "ran longer than its timeout of 2s" in row.errors[-1]["message"]
    assert set(Job.objects.filter(pk__in=[j.pk for j in after])
               .values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
    assert (f"burst: abandoning 1 thread(s) still running job(s) {stuck.pk} past their time "
            "limit") in output
    assert "burst: nothing left to do, exiting" in output
    # The status lines: no "progress" (that is report_progress's word), none repeated.
    assert "progress:" not in output
    statuses = [line for line in output.splitlines() if line.startswith("burst: attempts_run=")]
    assert statuses and len(statuses) == len(set(statuses)), output
