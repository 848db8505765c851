"""A rolling deploy: an old worker, whose code lacks a task, beside a new one that has it. The
old one gives the task's jobs back without using an attempt (run/unknown.py), saying so once;
the new one runs each of them once. Real runworker processes."""

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.support.waiting import wait_until
from tests.testapp.jobs import work
from tests.testapp.models import Run

pytestmark = pytest.mark.django_db(transaction=True)
OLD_CODE = {"SQLQUEUE_TEST_OLD_CODE": "1"}  # tests/settings.py: no tests/testapp/jobs.py
SETTINGS = {"POLL_INTERVAL_SECONDS": 0.2, "UNKNOWN_TASK_DELAY_SECONDS": 1}


def given_back(pks) -> bool:
    return all(job.errors and job.errors[0].get("unknown_task")
               for job in Job.objects.filter(pk__in=pks))


def test_an_old_worker_gives_back_what_it_does_not_know_and_the_new_one_runs_it(start_worker):
    pks = [work.using(max_attempts=1).enqueue(key=f"job-{n}").pk for n in range(12)]
    old = start_worker("-c", "2", settings=SETTINGS, env=OLD_CODE, name="old")
    # Alone, the old worker gives every one of them back (and again, each second).
    wait_until(lambda: given_back(pks), what="the old worker to give every job back", worker=old)
    assert not Run.objects.exists()
    new = start_worker("-c", "2", settings=SETTINGS, name="new")
    wait_until(lambda: set(Job.objects.filter(pk__in=pks).values_list("status", flat=True))
               == {JobStatus.SUCCEEDED}, what="every job to succeed", worker=[old, new])
    assert old.is_running(), old.output
    runs = list(Run.objects.values_list("job_id", "pid"))
    assert sorted(job_id for job_id, _ in runs) == sorted(pks)  # each ran once
    assert {pid for _, pid in runs} == {new.pid}
    for job in Job.objects.filter(pk__in=pks):
        # Each give-back raised max_attempts with attempts: only the real run used one.
        assert job.attempts - (job.max_attempts - 1) == 1, (job.attempts, job.max_attempts)
        assert len(job.errors) == 1  # the first give-back's entry; the later ones add none
    assert old.output.count("task 'chaos.work' is not registered in this worker") == 1, old.output
