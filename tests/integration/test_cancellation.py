"""Cancelling a running job, as the database sees it: the request is recorded at once with who
and when, the status stays running until the worker stops the attempt, and then every outcome
of that attempt, whatever it was, is written ``cancelled``: a late success cannot overwrite it,
a failure with attempts left does not bring it back, and neither does the rescue of its lost
worker. The worker's side (learning of it, stopping the job) is in
tests/process/test_cancel_running_worker.py.
"""

import datetime as dt

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.factories import JobFactory, claimed_job

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.timezone.utc)


def at(seconds):
    return T0 + dt.timedelta(seconds=seconds)


def fresh(job):
    return Job.objects.get(pk=job.pk)


def asked_to_stop(job, by="alice"):
    """The job as its worker holds it (claimed), after someone else cancelled it."""
    assert fresh(job).cancel(by=by, now=at(1)) is True
    return job


def test_cancel_of_a_running_job_records_the_request_and_leaves_it_running():
    job = claimed_job(run_at=T0, now=T0)
    other = fresh(job)
    assert other.cancel(by="alice", now=at(1)) is True
    assert (other.status, other.cancel_requested_at, other.cancelled_by) == (
        JobStatus.RUNNING, at(1), "alice")
    assert other.cancel_requested
    assert fresh(job).cancel(by="bob", now=at(2)) is False  # asked already: who asked first stays
    assert fresh(job).cancelled_by == "alice"
    assert list(Job.objects.cancelling()) == [job]


def test_a_late_success_of_the_cancelled_attempt_ends_cancelled_with_its_result():
    job = asked_to_stop(claimed_job(run_at=T0, now=T0))
    assert job.complete(3, now=at(2)) is True  # the claim's write lands, as cancelled
    assert job.status == JobStatus.CANCELLED
    row = fresh(job)
    assert (row.status, row.result, row.finished_at) == (JobStatus.CANCELLED, 3, at(2))
    assert list(Job.objects.cancelled_while_running()) == [job]
    assert job.complete(4, now=at(3)) is False  # nothing overwrites it after that
    assert fresh(job).status == JobStatus.CANCELLED


@pytest.mark.parametrize("outcome", ["fail", "reschedule", "release"])
def test_no_outcome_of_the_cancelled_attempt_lets_it_run_again(outcome):
    job = asked_to_stop(claimed_job(run_at=T0, now=T0, max_attempts=5))
    if outcome == "fail":
        assert job.fail(RuntimeError("boom"), now=at(2)) is True
    elif outcome == "reschedule":
        assert job.reschedule(delay=1, now=at(2)) is True
    else:
        assert job.release(now=at(2)) is True
    row = fresh(job)
    assert row.status == JobStatus.CANCELLED and row.finished_at is not None
    assert Job.objects.claim(now=at(10_000)) == []


def test_a_lost_worker_s_cancelled_job_is_rescued_as_cancelled_not_retried():
    job = asked_to_stop(claimed_job(run_at=T0, now=T0, max_attempts=5))
    assert Job.objects.filter(pk=job.pk).rescue(at(1000)) == 1
    row = fresh(job)
    assert (row.status, row.finished_at) == (JobStatus.CANCELLED, at(1000))
    assert row.errors[-1]["type"] == "django_sqlqueue.run.outcomes.WorkerLost"
    assert Job.objects.claim(now=at(10_000)) == []


def test_cancel_of_a_job_that_has_not_started_says_who_and_is_not_a_request():
    job = JobFactory()
    assert job.cancel(by="alice", now=at(1)) is True
    assert (job.status, job.finished_at, job.cancelled_by, job.cancel_requested_at) == (
        JobStatus.CANCELLED, at(1), "alice", None)
    assert not Job.objects.cancelled_while_running().exists()


def test_retry_now_of_a_job_cancelled_while_running_runs_it_again_to_success():
    job = asked_to_stop(claimed_job(run_at=T0, now=T0))
    assert job.fail(RuntimeError("stopped"), now=at(2)) is True
    assert Job.objects.filter(pk=job.pk).retry_now(now=at(3)) == 1
    assert (fresh(job).cancel_requested_at, fresh(job).cancelled_by) == (None, None)
    again = Job.objects.claim(now=at(4))[0]
    assert again.complete("done", now=at(5)) is True
    assert fresh(job).status == JobStatus.SUCCEEDED
