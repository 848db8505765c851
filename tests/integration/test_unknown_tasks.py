"""A job whose task the worker does not know (run/unknown.py): given back without using an
attempt, due UNKNOWN_TASK_DELAY_SECONDS later, until the task has been unknown for
UNKNOWN_TASK_MAX_SECONDS; then exhausted with UnknownTask. Two real workers, an old and a new,
are in tests/process/test_rolling_deploy.py."""

import datetime as dt
import logging

import pytest
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.run import unknown
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.statuses import JobStatus

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def nothing_told(monkeypatch):
    monkeypatch.setattr(unknown, "_told", set())


def claim(now=None):
    (job,) = Job.objects.claim(worker_id="old", limit=1, now=now)
    return job


def test_a_job_of_an_unknown_task_is_given_back_without_using_an_attempt_and_logged_once(caplog):
    jobs = [Job.objects.create(task_name="added.later", max_attempts=1) for _ in range(2)]
    with caplog.at_level(logging.WARNING, logger="django_sqlqueue.runner"):
        for _ in jobs:
            assert run_job(claim()).outcome == "rescheduled"
    told = [r for r in caplog.records if "'added.later' is not registered" in r.getMessage()]
    assert len(told) == 1  # once per task name per worker process
    for job in jobs:
        job.refresh_from_db()
        assert job.status == JobStatus.QUEUED
        assert job.max_attempts - job.attempts == 1  # max_attempts=1: still one left
        delay = (job.run_at - timezone.now()).total_seconds()
        assert 3 < delay <= 5  # UNKNOWN_TASK_DELAY_SECONDS
        (entry,) = job.errors
        assert entry["unknown_task"] and entry["type"].endswith(".UnknownTask")
        assert "given back without using an attempt" in entry["message"]


def test_given_back_again_and_again_it_records_one_entry_then_ends_past_the_bound():
    job = Job.objects.create(task_name="nobody.knows", max_attempts=1)
    later = timezone.now()
    for _ in range(3):  # each give-back is due 5 s later: claim as of then
        later += dt.timedelta(seconds=6)
        assert run_job(claim(now=later)).outcome == "rescheduled"
    job.refresh_from_db()
    assert len(job.errors) == 1 and job.status == JobStatus.QUEUED
    # Time-travel: the streak began longer ago than UNKNOWN_TASK_MAX_SECONDS (1 hour).
    job.errors[0]["at"] = (timezone.now() - dt.timedelta(hours=1, seconds=1)).isoformat()
    Job.objects.filter(pk=job.pk).update(errors=job.errors)
    assert run_job(claim(now=later + dt.timedelta(seconds=6))).outcome == "exhausted"
    job.refresh_from_db()
    assert job.status == JobStatus.EXHAUSTED
    last = job.errors[-1]
    assert last["type"].endswith(".UnknownTask")
    assert "'nobody.knows' is not registered" in last["message"]
    assert "longer than UNKNOWN_TASK_MAX_SECONDS (3600s)" in last["message"]
    # retry_now() queues it again as any job: a new streak, a new hour.
    assert Job.objects.filter(pk=job.pk).retry_now() == 1
    assert run_job(claim(now=later + dt.timedelta(seconds=12))).outcome == "rescheduled"


def test_the_bound_is_a_setting(settings):
    settings.SQLQUEUE = {"UNKNOWN_TASK_MAX_SECONDS": 0.5, "UNKNOWN_TASK_DELAY_SECONDS": 0.1}
    job = Job.objects.create(task_name="nobody.knows")
    assert run_job(claim()).outcome == "rescheduled"
    job.refresh_from_db()
    job.errors[0]["at"] = (timezone.now() - dt.timedelta(seconds=1)).isoformat()
    Job.objects.filter(pk=job.pk).update(errors=job.errors)
    assert run_job(claim(now=timezone.now() + dt.timedelta(seconds=1))).outcome == "exhausted"


def test_a_bad_setting_is_refused_naming_it(settings):
    from django.core.exceptions import ImproperlyConfigured

    from django_sqlqueue.conf import get_settings

    settings.SQLQUEUE = {"UNKNOWN_TASK_DELAY_SECONDS": 0}
    with pytest.raises(ImproperlyConfigured, match="UNKNOWN_TASK_DELAY_SECONDS must be positive"):
        get_settings()
