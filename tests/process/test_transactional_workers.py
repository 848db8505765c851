"""Transactional jobs under real ``runworker`` processes (docs/transactional-jobs.md): drained
with ``--burst`` through the lane and through the ordinary claim, a failure's row rolled back and
its retry's kept, each job's row written once; two lanes racing over one queue take each job once.
Kills and a database restart: tests/chaos/test_transactional_kills.py."""

import pytest
from django.db.models import Count

from django_sqlqueue.models import Job
from django_sqlqueue.queues.control import set_limits
from django_sqlqueue.statuses import JobStatus
from tests.testapp.jobs import insert_once, work
from tests.testapp.models import Execution, Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]
# The lease is the default's 30 s: no test here kills a worker, and on SQLite a lane's
# transaction holds the one write lock while its jobs run, which the other worker's heartbeat
# waits for. With 3 s, a loaded CI machine let a lease lapse there, and the rescue ran a job
# again, as a lapsed lease should (the claim's contract holds while the lease does).
FAST = {"LEASE_SECONDS": 30, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.2,
        "BACKOFF_SECONDS": 0.1, "MIN_RETRY_DELAY_SECONDS": 0.1, "RETRY_JITTER": 0}


def _enqueue(count):
    jobs = Job.objects.bulk_enqueue(insert_once.prepare(str(n)) for n in range(count))
    flaky = insert_once.using(retry_backoff=0.1, retry_min_delay=0.1).enqueue("flaky",
                                                                       fail_first=1)
    plain = work.enqueue("plain")
    return [*jobs, flaky], flaky, plain


def _assert_each_row_once(jobs, flaky, plain):
    assert not Job.objects.exclude(status=JobStatus.SUCCEEDED).exists()
    by_job = dict(Execution.objects.values_list("job_id").annotate(n=Count("pk")))
    assert by_job == {job.pk: 1 for job in jobs}
    flaky.refresh_from_db()
    assert flaky.attempts == 2 and len(flaky.errors) == 1
    assert list(Execution.objects.filter(job_id=flaky.pk).values_list("attempt", flat=True)) == [2]
    assert Run.objects.filter(job_id=plain.pk).count() == 1  # the normal job ran as ever


@pytest.mark.parametrize("args", [["--transactional-batch", "7"], []],
                         ids=["the lane", "the ordinary claim"])
def test_a_burst_worker_runs_each_transactional_job_once(start_worker, args):
    jobs, flaky, plain = _enqueue(40)
    worker = start_worker("--burst", "-c", "3", *args, settings=FAST)
    assert worker.wait(timeout=120) == 0, worker.output
    _assert_each_row_once(jobs, flaky, plain)
    assert "burst: nothing left to do" in worker.output


def test_lanes_of_two_workers_racing_over_one_queue_take_each_job_once(start_worker):
    jobs, flaky, plain = _enqueue(300)
    workers = [start_worker("--burst", "-c", "2", "--transactional-batch", "5",
                            "--transactional-lanes", str(lanes), settings=FAST)
               for lanes in (3, 1)]
    for worker in workers:
        assert worker.wait(timeout=240) == 0, worker.output
    _assert_each_row_once(jobs, flaky, plain)


def test_a_limited_queues_transactional_jobs_are_left_to_the_claim_that_enforces_the_limit(
        start_worker):
    set_limits("limited", concurrency_limit=2)
    jobs = [insert_once.using(queue="limited").enqueue(str(n)) for n in range(10)]
    plain = work.using(queue="limited").enqueue("plain")  # and a normal job there runs too
    worker = start_worker("--burst", "-c", "3", "--transactional-batch", "5", settings=FAST)
    assert worker.wait(timeout=120) == 0, worker.output
    assert not Job.objects.exclude(status=JobStatus.SUCCEEDED).exists()
    by_job = dict(Execution.objects.values_list("job_id").annotate(n=Count("pk")))
    assert by_job == {job.pk: 1 for job in jobs}
    # Claimed as any job, under the queue's limit: each has a claim token (the lane writes none).
    assert not Job.objects.filter(claim_token__isnull=True).exists()
    assert Run.objects.filter(job_id=plain.pk).count() == 1
