"""run_job: calling the registered function of a claimed job and recording what happened."""

import datetime as dt
import json
import os
import sys

import pytest
from django.db import connection
from django.utils import timezone

from django_sqlqueue import current_job
from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.run.retry import retry_delay_seconds
from django_sqlqueue.statuses import JobStatus
from tests.factories import JobFactory, claimed_job
from tests.support.claims import claim_one
from tests.testapp.models import Execution
from tests.testapp.tasks import (
    add,
    always_fails,
    async_add,
    async_whoami,
    exits,
    gives_up,
    returns_object,
    send_email,
    wants_rescheduling,
)

pytestmark = pytest.mark.django_db


def policy_delay(job, attempt):
    return dt.timedelta(
        seconds=retry_delay_seconds(
            attempt,
            backoff=job.retry_backoff_seconds,
            min_delay=job.retry_min_delay_seconds,
            max_delay=job.retry_max_delay_seconds,
            jitter=0,
        )
    )


# ---- success ------------------------------------------------------------------------------------
def test_sync_task_result_is_stored():
    job = claimed_job(add, (2, 3))
    result = run_job(job)
    assert result.outcome == "succeeded"
    assert result.job is job and result.duration_seconds >= 0
    job.refresh_from_db()
    assert (job.status, job.result, job.errors) == (JobStatus.SUCCEEDED, 5, [])
    assert job.finished_at is not None


def test_kwargs_reach_the_function():
    job = claimed_job(send_email, ("a@example.com",), {"subject": "Hi"}, queue="emails")
    assert run_job(job).outcome == "succeeded"
    job.refresh_from_db()
    assert job.result == {"to": "a@example.com", "subject": "Hi"}


def test_async_task_is_awaited_and_its_result_stored():
    job = claimed_job(async_add, (20, 22))
    assert run_job(job).outcome == "succeeded"
    job.refresh_from_db()
    assert (job.status, job.result) == (JobStatus.SUCCEEDED, 42)


# ---- current_job() ------------------------------------------------------------------------------
def test_current_job_inside_a_task_is_the_running_job():
    assert current_job() is None
    job = claimed_job("tests.record", (), {"tag": "first"}, worker_id="w1")
    run_job(job)
    assert current_job() is None  # reset after the run
    Job.objects.filter(pk=job.pk).update(status=JobStatus.QUEUED)  # run it again elsewhere
    again = claim_one("w2")
    run_job(again)
    rows = Execution.objects.order_by("attempt").values_list("job_id", "attempt", "worker", "tag")
    assert list(rows) == [(job.pk, 1, "w1", "first"), (job.pk, 2, "w2", "first")]


def test_current_job_is_visible_in_async_tasks():
    job = claimed_job(async_whoami, ())
    run_job(job)
    job.refresh_from_db()
    assert job.result == {"id": job.pk, "attempt": 1}


def test_current_job_is_reset_when_the_task_raises():
    run_job(claimed_job(always_fails, ("x",)))
    assert current_job() is None


# ---- failure ------------------------------------------------------------------------------------
def test_raising_task_fails_records_the_error_and_retries_by_its_policy():
    job = claimed_job(always_fails, ("kaboom 42",), retry_backoff=7, retry_jitter=0)
    assert job.max_attempts == 3  # from @job(max_attempts=3)
    for attempt in (1, 2):
        before = timezone.now()
        assert run_job(job).outcome == "failed"
        after = timezone.now()
        job.refresh_from_db()
        assert job.status == JobStatus.FAILED
        delay = policy_delay(job, attempt)
        assert before + delay <= job.run_at <= after + delay
        entry = job.errors[-1]
        assert entry["attempt"] == attempt
        assert entry["type"] == "builtins.RuntimeError"
        assert entry["message"] == "kaboom 42"
        assert "RuntimeError: kaboom 42" in entry["traceback"]
        assert "always_fails" in entry["traceback"]  # the frame of the job function
        job = claim_one(now=job.run_at)
    assert run_job(job).outcome == "exhausted"
    job.refresh_from_db()
    assert job.status == JobStatus.EXHAUSTED
    assert [e["attempt"] for e in job.errors] == [1, 2, 3]


def test_wrong_arguments_fail_the_attempt_with_the_type_error():
    """Enqueue refuses such a call; a row can still hold one: enqueued before the function's
    signature changed, or inserted by SQL."""
    job = claimed_job(add, (1, 2))
    Job.objects.filter(pk=job.pk).update(payload={"args": [1], "kwargs": {"c": 2}})
    job.refresh_from_db()
    assert run_job(job).outcome == "failed"
    job.refresh_from_db()
    assert job.errors[0]["type"] == "builtins.TypeError"
    assert "'c'" in job.errors[0]["message"]


def test_non_json_return_value_fails_the_job_with_a_clear_message():
    job = claimed_job(returns_object, ())
    # The function ran to its end (side effects and all), so it is not run again.
    assert run_job(job).outcome == "exhausted"
    job.refresh_from_db()
    assert job.status == JobStatus.EXHAUSTED and job.result is None
    assert job.attempts < job.max_attempts
    message = job.errors[0]["message"]
    assert "the result is <object object" in message
    assert "builtins.object" in message and "not JSON-serialisable" in message


def test_abort_exhausts_the_job_without_retrying():
    job = claimed_job(gives_up, ("the account was deleted",))
    assert job.attempts < job.max_attempts
    assert run_job(job).outcome == "exhausted"
    job.refresh_from_db()
    assert job.status == JobStatus.EXHAUSTED and job.finished_at is not None
    [entry] = job.errors
    assert entry["type"] == "django_sqlqueue.exceptions.Abort"
    assert entry["message"] == "the account was deleted"
    assert Job.objects.claim(now=timezone.now() + dt.timedelta(days=365)) == []


def test_system_exit_in_a_job_fails_the_attempt_and_not_the_caller():
    # As in the worker, where a job thread must survive a job's sys.exit().
    job = claimed_job(exits, (3,))
    assert run_job(job).outcome == "failed"
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert [entry["type"] for entry in job.errors] == ["builtins.SystemExit"]


# ---- reschedule ---------------------------------------------------------------------------------
def test_reschedule_raised_in_the_task_queues_it_later_without_a_failure():
    job = claimed_job(wants_rescheduling, (120,))
    max_attempts = job.max_attempts
    before = timezone.now()
    assert run_job(job).outcome == "rescheduled"
    after = timezone.now()
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and job.errors == []
    assert before + dt.timedelta(seconds=120) <= job.run_at <= after + dt.timedelta(seconds=120)
    assert (job.attempts, job.max_attempts) == (1, max_attempts + 1)


def test_reschedule_with_an_invalid_delay_is_recorded_not_raised():
    job = claimed_job(wants_rescheduling, (-5,))
    run_job(job)  # a bad delay fails the attempt instead of raising out of run_job
    job.refresh_from_db()
    assert job.status != JobStatus.RUNNING
    assert "delay is -5" in job.errors[-1]["message"]


# ---- malformed rows -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "payload, fragment",
    [
        ([1, 2], "has payload [1, 2]; it must be a JSON object"),
        ("args", "has payload 'args'"),
        ({"args": "1, 2"}, '"args" must be a JSON array'),
        ({"args": [], "kwargs": [["tag", "x"]]}, '"kwargs" a JSON object'),
    ],
)
def test_malformed_payload_is_exhausted_and_the_task_never_called(payload, fragment):
    job = JobFactory(task_name="tests.record", payload=payload)
    claimed = claim_one()
    assert claimed.pk == job.pk
    assert run_job(claimed).outcome == "exhausted"
    job.refresh_from_db()
    assert job.status == JobStatus.EXHAUSTED
    assert f"job {job.pk} " in job.errors[0]["message"]
    assert fragment in job.errors[0]["message"]
    assert not Execution.objects.exists()


def test_payload_missing_args_and_kwargs_calls_the_task_without_arguments():
    JobFactory(task_name="tests.record", payload={})
    run_job(claim_one())
    assert list(Execution.objects.values_list("tag", flat=True)) == [""]


# ---- security: a row names a registry key, never something to import -----------------------
def insert_row(task_name, payload):
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_sqlqueue_job (task_name, queue, payload) VALUES (%s, %s, %s)",
            [task_name, "default", payload],
        )


def test_row_naming_os_system_is_not_run(tmp_path, monkeypatch):
    target = tmp_path / "pwned"
    calls = []
    monkeypatch.setattr(os, "system", lambda command: calls.append(command) or 0)
    insert_row("os.system", json.dumps({"args": [f"touch {target}"], "kwargs": {}}))
    job = claim_one("w1", now=timezone.now() + dt.timedelta(seconds=1))
    assert job.task_name == "os.system"
    assert run_job(job).outcome == "rescheduled"  # given back: a newer worker may know it
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED
    entry = job.errors[0]
    assert entry["type"] == "django_sqlqueue.exceptions.UnknownTask"
    assert "'os.system' is not registered" in entry["message"]
    assert not target.exists()
    assert calls == []


@pytest.mark.parametrize(
    "task_name",
    ["tabnanny.check", "tests.testapp.tasks.record"],
)
def test_row_naming_an_importable_path_imports_and_runs_nothing(task_name):
    assert "tabnanny" not in sys.modules
    insert_row(task_name, '{"args": [], "kwargs": {"tag": "ran"}}')
    job = claim_one("w1", now=timezone.now() + dt.timedelta(seconds=1))
    assert run_job(job).outcome == "rescheduled"
    job.refresh_from_db()
    assert f"{task_name!r} is not registered" in job.errors[0]["message"]
    assert "tabnanny" not in sys.modules
    assert not Execution.objects.exists()  # tests.record is registered only under that name


# ---- lost lease ---------------------------------------------------------------------------------
def test_run_of_a_job_whose_lease_was_lost_reports_lost_and_leaves_the_new_owner_alone():
    old = claimed_job("tests.record", (), {"tag": "old"}, worker_id="w1")
    Job.objects.filter(pk=old.pk).update(status=JobStatus.QUEUED)
    new = claim_one("w2", now=timezone.now() + dt.timedelta(seconds=1))
    assert run_job(old).outcome == "lost"
    row = Job.objects.get(pk=new.pk)
    assert (row.status, row.claimed_by, row.claim_token) == (
        JobStatus.RUNNING, "w2", new.claim_token
    )
    assert run_job(new).outcome == "succeeded"
    assert Job.objects.get(pk=new.pk).status == JobStatus.SUCCEEDED
