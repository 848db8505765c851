"""Django's Tasks API end to end through SQLQueueBackend and a real runworker process."""

import datetime as dt

import pytest

django_tasks = pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.tasks import TaskResultStatus, task_backends  # noqa: E402
from django.tasks.exceptions import TaskResultDoesNotExist  # noqa: E402
from django.tasks.signals import task_enqueued  # noqa: E402
from django.utils import timezone  # noqa: E402

from django_sqlqueue.backend import SQLQueueBackend  # noqa: E402
from django_sqlqueue.models import Job  # noqa: E402
from tests.support.waiting import wait_started, wait_until  # noqa: E402
from tests.testapp import django_tasks as tasks  # noqa: E402
from tests.testapp.models import Execution  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)
FAST = {"POLL_INTERVAL_SECONDS": 0.2, "MAINTENANCE_INTERVAL_SECONDS": 0.5}


def drain(start_worker, *args):
    worker = start_worker("--burst", *args, settings=FAST)
    assert worker.wait() == 0, worker.output
    return worker


def test_success_result_and_enqueued_signal(start_worker):
    seen = []
    task_enqueued.connect(lambda sender, task_result, **kw: seen.append((sender, task_result.id)),
                          weak=False, dispatch_uid="t-enq")
    try:
        result = tasks.add.enqueue(2, 3)
    finally:
        task_enqueued.disconnect(dispatch_uid="t-enq")
    assert seen == [(SQLQueueBackend, result.id)]
    assert result.status == TaskResultStatus.READY and result.args == [2, 3]
    drain(start_worker)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 5
    assert len(result.worker_ids) == 1 and result.worker_ids[0].startswith("w0:")
    assert result.enqueued_at <= result.started_at <= result.finished_at
    tags = set(Execution.objects.filter(job_id=int(result.id)).values_list("tag", flat=True))
    assert tags == {"started:SQLQueueBackend:RUNNING", "finished:SUCCESSFUL:exc=False"}


needs_task_options = pytest.mark.skipif(
    not tasks.TASK_OPTIONS, reason="@task(max_attempts=...) needs Django 6.1"
)


@needs_task_options
def test_failure_is_retried_then_failed_with_one_error_per_attempt(start_worker):
    result = tasks.always_fails.enqueue("boom")
    drain(start_worker)
    result = tasks.always_fails.get_result(result.id)
    assert result.status == TaskResultStatus.FAILED
    assert [e.exception_class for e in result.errors] == [RuntimeError] * 3
    assert "boom" in result.errors[0].traceback
    assert len(result.worker_ids) == result.attempts == 3
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    tags = list(Execution.objects.filter(job_id=int(result.id), tag__startswith="finished")
                .order_by("attempt").values_list("tag", flat=True))
    # task_finished is sent from inside the except block, as Django's log receiver expects.
    assert tags == ["finished:READY:exc=True"] * 2 + ["finished:FAILED:exc=True"]


def test_backend_options_retry_every_task_of_the_backend(start_worker):
    """OPTIONS["MAX_ATTEMPTS"] and ["BACKOFF"]: the way to retry on Django 6.0 too."""
    result = tasks.fails_retried_by_options.enqueue("boom")
    assert result.backend == "retrying"
    drain(start_worker)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert [e.exception_class for e in result.errors] == [RuntimeError] * 3


@needs_task_options
def test_backoff_returning_none_stops_retrying(start_worker):
    result = tasks.fails_with_value_error.enqueue()
    drain(start_worker)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 1


def test_deferred_run_after_is_honoured(start_worker):
    run_after = timezone.now() + dt.timedelta(seconds=1.5)
    result = tasks.add.using(run_after=run_after).enqueue(1, 1)
    worker = start_worker(settings=FAST)
    wait_until(lambda: tasks.add.get_result(result.id).status == TaskResultStatus.SUCCESSFUL,
               what="the deferred task", worker=worker)
    result.refresh()
    assert result.started_at >= run_after


def test_priority_order(start_worker):
    low = tasks.add.using(priority=-5).enqueue(1, 1)
    high = tasks.add_urgent.enqueue(2, 2)
    normal = tasks.add.enqueue(3, 3)
    drain(start_worker, "--concurrency", "1")
    # Jobs claimed together share their started_at (the claim time); finished_at tells them apart.
    results = [tasks.add.get_backend().get_result(r.id) for r in (low, high, normal)]
    started = sorted(results, key=lambda r: (r.started_at, r.finished_at))
    assert [r.id for r in started] == [high.id, normal.id, low.id]


def test_async_task_and_aenqueue(start_worker):
    from asgiref.sync import async_to_sync

    result = async_to_sync(tasks.async_add.aenqueue)(20, 22)
    drain(start_worker)
    assert async_to_sync(tasks.async_add.aget_result)(result.id).return_value == 42


def test_takes_context_gets_the_attempt_and_id(start_worker):
    result = tasks.with_context.enqueue(7)
    drain(start_worker)
    result.refresh()
    assert result.return_value == {"attempt": 1, "id": result.id, "x": 7}


def test_get_result_for_every_status():
    backend = task_backends["default"]
    ready = tasks.add.enqueue(1, 2)
    assert backend.get_result(ready.id).status == TaskResultStatus.READY
    (job,) = Job.objects.claim(None, "test-worker")
    running = backend.get_result(ready.id)
    assert running.status == TaskResultStatus.RUNNING and running.worker_ids == ["test-worker"]
    job.complete(3)
    assert backend.get_result(ready.id).return_value == 3
    failed = tasks.add.enqueue(1, 2)
    Job.objects.filter(pk=int(failed.id)).cancel(by="ops")
    cancelled = backend.get_result(failed.id)
    assert cancelled.status == TaskResultStatus.FAILED
    # Cancelled before it started: no attempt recorded an error, the result says why anyway.
    assert [e.exception_class_path for e in cancelled.errors] == [
        "django_sqlqueue.exceptions.JobCancelled"]
    assert "cancelled by ops" in cancelled.errors[0].traceback
    for missing in ["999999", "not-a-number"]:
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(missing)


def test_only_real_tasks_of_this_backend_run(start_worker):
    not_a_task = Job.objects.create(task_name="django.tasks:os.system",
                                    payload={"args": ["touch /tmp/pwned"]})
    other_backend = Job.objects.create(
        task_name="django.tasks:tests.testapp.django_tasks.immediate_add",
        payload={"args": [1, 2], "backend": "immediate"},
    )
    good = tasks.add.enqueue(1, 1)
    drain(start_worker)
    not_a_task.refresh_from_db()
    other_backend.refresh_from_db()
    assert not_a_task.status == "exhausted"
    assert "not a django.tasks Task: refused" in not_a_task.errors[0]["message"]
    assert other_backend.status == "exhausted"
    assert "not django-sqlqueue's: refused" in other_backend.errors[0]["message"]
    assert tasks.add.get_result(good.id).status == TaskResultStatus.SUCCESSFUL


# ---- Django's contract for backends ----------------------------------------------------------
def test_result_task_is_the_task_that_was_enqueued():
    plain = tasks.add.enqueue(1, 2)
    assert plain.task == tasks.add
    later = tasks.add.using(priority=7, run_after=timezone.now() + dt.timedelta(hours=1))
    deferred = later.enqueue(1, 2)
    assert deferred.task == later
    assert tasks.add.get_result(plain.id).task == tasks.add
    assert tasks.add.get_result(deferred.id).task == later


def test_arguments_that_are_not_json_raise_type_error():
    with pytest.raises(TypeError):
        tasks.add.enqueue(dt.datetime(2026, 1, 1), 2)
    assert not Job.objects.exists()


def test_a_task_that_raises_ends_failed_after_one_attempt_by_default(start_worker):
    result = tasks.fails_once_by_default.enqueue("boom")
    drain(start_worker)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 1 and [e.exception_class for e in result.errors] == [RuntimeError]


def test_a_reschedule_with_a_negative_delay_fails_the_attempt(start_worker):
    result = tasks.reschedules_into_the_past.enqueue()
    worker = drain(start_worker)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED, worker.output
    [error] = result.errors
    assert error.exception_class_path == "django_sqlqueue.exceptions.InvalidSchedule"
    assert Job.objects.get(pk=int(result.id)).status == "exhausted"  # not left running


def test_system_exit_fails_the_task_and_sends_task_finished(start_worker):
    result = tasks.exits.enqueue(3)
    drain(start_worker)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in result.errors] == ["builtins.SystemExit"]
    tags = list(Execution.objects.filter(job_id=int(result.id)).values_list("tag", flat=True))
    assert sorted(tags) == ["finished:FAILED:exc=True", "started:SQLQueueBackend:RUNNING"]


def test_a_running_async_task_cancelled_ends_failed_with_a_clear_error(start_worker):
    result = tasks.async_sleep.enqueue(60)
    worker = start_worker(settings={**FAST, "LEASE_SECONDS": 3})
    wait_started(int(result.id), worker)
    assert Job.objects.filter(pk=int(result.id)).cancel(by="ops") == 1
    wait_until(lambda: task_backends["default"].get_result(result.id).status
               == TaskResultStatus.FAILED, what="the cancel", worker=worker, timeout=20)
    cancelled = task_backends["default"].get_result(result.id)
    assert [e.exception_class_path for e in cancelled.errors] == [
        "django_sqlqueue.exceptions.JobCancelled"]
    assert Job.objects.get(pk=int(result.id)).status == "cancelled"
    # task_finished was sent once, with the FAILED status.
    assert list(Execution.objects.filter(job_id=int(result.id), worker="signal")
                .values_list("tag", flat=True).order_by("pk")) == [
        "started:SQLQueueBackend:RUNNING", "finished:FAILED:exc=True"]
