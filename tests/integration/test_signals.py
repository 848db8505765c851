"""The ``@job`` signals: each sent once per event, with what users read in their receivers, and a
receiver that raises never fails the enqueue or the job."""

import datetime as dt
import sys

import pytest
from django.db import transaction
from django.utils import timezone

from django_sqlqueue import signals
from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.run.runner import OutcomeKind
from django_sqlqueue.statuses import JobStatus
from tests.factories import claimed_job
from tests.testapp.tasks import add, always_fails, gives_up, wants_rescheduling

pytestmark = pytest.mark.django_db


@pytest.fixture
def received():
    """Connect a recorder to every ``@job`` signal: a list of (signal name, kwargs)."""
    calls = []
    connected = []
    for name in ("job_enqueued", "job_started", "job_finished", "job_retried", "job_rescued"):
        def receiver(sender, name=name, **kwargs):
            assert sender is Job
            kwargs.pop("signal")
            kwargs["exc_info"] = sys.exc_info()[1]
            calls.append((name, kwargs))

        getattr(signals, name).connect(receiver, weak=False)
        connected.append((getattr(signals, name), receiver))
    yield calls
    for signal, receiver in connected:
        signal.disconnect(receiver)


def names(calls):
    return [name for name, _ in calls]


def test_enqueued_once_per_inserted_job(received):
    job = add.enqueue(1, 2)
    jobs = Job.objects.bulk_enqueue(add.prepare(n, n) for n in range(3))
    assert names(received) == ["job_enqueued"] * 4
    assert [kw["job"] for _, kw in received] == [job, *jobs]
    assert all(kw["job"].pk is not None for _, kw in received)


def test_enqueued_not_sent_when_a_unique_key_is_taken(received):
    first = add.using(unique_key="k").enqueue(1, 2)
    assert add.using(unique_key="k").enqueue(1, 2) == first
    assert names(received) == ["job_enqueued"]


def test_started_then_finished_with_the_result(received):
    job = claimed_job(add, (2, 3))
    received.clear()
    run_job(job)
    assert names(received) == ["job_started", "job_finished"]
    assert received[0][1]["job"].attempts == 1
    finished = received[1][1]
    assert finished["outcome"] == OutcomeKind.SUCCEEDED and finished["result"] == 5
    assert finished["exception"] is None and finished["will_retry"] is False


def test_finished_with_the_exception_inside_its_except_block(received):
    job = claimed_job(always_fails, ("boom",))
    received.clear()
    run_job(job)
    finished = dict(received)["job_finished"]
    assert finished["outcome"] == OutcomeKind.FAILED and finished["will_retry"] is True
    assert isinstance(finished["exception"], RuntimeError)
    # Sent inside the except block: sentry_sdk.capture_exception() without arguments works.
    assert finished["exc_info"] is finished["exception"]


def test_finished_aborted_does_not_retry(received):
    job = claimed_job(gives_up, ("no",))
    received.clear()
    run_job(job)
    assert names(received) == ["job_started", "job_finished"]  # no job_retried
    assert dict(received)["job_finished"]["outcome"] == OutcomeKind.ABORTED
    assert dict(received)["job_finished"]["will_retry"] is False


def test_retried_once_the_failure_is_written_until_the_last_attempt(received):
    job = claimed_job(always_fails, ("boom",))  # max_attempts=3
    received.clear()
    run_job(job)
    assert names(received) == ["job_started", "job_finished", "job_retried"]
    retried = dict(received)["job_retried"]
    assert retried["job"].status == JobStatus.FAILED and retried["job"].run_at > timezone.now()
    assert retried["error"]["message"] == "boom" and retried["error"]["attempt"] == 1
    for attempt in (2, 3):
        received.clear()
        (job,) = Job.objects.claim(None, "w1", now=job.run_at)
        run_job(job)
        assert names(received) == (["job_started", "job_finished", "job_retried"]
                                   if attempt < 3 else ["job_started", "job_finished"])
    assert Job.objects.get(pk=job.pk).status == JobStatus.EXHAUSTED


def test_a_reschedule_is_not_a_retry(received):
    job = claimed_job(wants_rescheduling, (60,))
    received.clear()
    run_job(job)
    assert names(received) == ["job_started", "job_finished"]
    assert dict(received)["job_finished"]["outcome"] == OutcomeKind.RESCHEDULED


def test_rescued_after_the_rescue_commits(received, django_capture_on_commit_callbacks):
    job = claimed_job(add, (1, 2), lease=60)
    last = claimed_job(add.using(max_interruptions=1, queue="emails"), (1, 2), lease=60)
    later = timezone.now() + dt.timedelta(hours=1)  # both leases ran out
    received.clear()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        with transaction.atomic():
            assert Job.objects.lease_expired(later).rescue(later) == 2
        assert received == []  # not before the commit
    for callback in callbacks:
        callback()
    assert names(received) == ["job_rescued", "job_rescued"]
    by_job = {kw["job"].pk: kw for _, kw in received}
    assert by_job[job.pk]["will_retry"] is True
    assert by_job[job.pk]["job"].status == JobStatus.QUEUED
    assert by_job[last.pk]["will_retry"] is False
    assert by_job[last.pk]["job"].status == JobStatus.EXHAUSTED
    assert by_job[job.pk]["reason"] == "its lease expired"


def test_a_failing_receiver_is_logged_and_never_fails_the_job(caplog):
    def broken(sender, **kwargs):
        raise ValueError("receiver bug")

    for signal in (signals.job_enqueued, signals.job_started, signals.job_finished):
        signal.connect(broken)
    try:
        job = add.enqueue(2, 2)
        (job,) = Job.objects.claim(None, "w1")
        assert run_job(job).outcome == "succeeded"
    finally:
        for signal in (signals.job_enqueued, signals.job_started, signals.job_finished):
            signal.disconnect(broken)
    assert Job.objects.get(pk=job.pk).result == 4
    failures = [r for r in caplog.records if r.name == "django_sqlqueue.signals"]
    assert len(failures) == 3 and all(r.exc_info[0] is ValueError for r in failures)
    assert "the job is not affected" in failures[0].getMessage()


def test_no_receiver_no_signal_attempt():
    """Without receivers the runner uses the plain attempt, which sends nothing."""
    from django_sqlqueue.run import runner

    job = claimed_job(add, (1, 1))
    assert type(runner._load(job)) is runner.Attempt


def test_django_tasks_jobs_get_djangos_signals_not_these(received):
    pytest.importorskip("django.tasks")
    from django.tasks.signals import task_enqueued

    from tests.testapp.django_tasks import add as django_add

    djangos = []
    task_enqueued.connect(lambda **kw: djangos.append(kw), weak=False, dispatch_uid="t")
    try:
        result = django_add.enqueue(1, 2)
    finally:
        task_enqueued.disconnect(dispatch_uid="t")
    assert len(djangos) == 1 and received == []
    (job,) = Job.objects.claim(None, "w1")
    assert job.pk == int(result.id)
    run_job(job)
    assert received == []  # Django's task_started / task_finished instead


def test_the_django_tasks_prefix_is_the_backends():
    pytest.importorskip("django.tasks")
    from django_sqlqueue.backend import DJANGO_TASK_PREFIX

    assert signals.DJANGO_TASKS_PREFIX == DJANGO_TASK_PREFIX
