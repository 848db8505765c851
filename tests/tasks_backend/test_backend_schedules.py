"""Periodic schedules of django.tasks tasks of SQLQueueBackend: declared with @schedule above
@task, enqueued as task.enqueue() would, run by the worker's adapter."""

import datetime as dt

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from django.tasks.exceptions import InvalidTask  # noqa: E402

from django_sqlqueue import schedule  # noqa: E402
from django_sqlqueue.models import Job, Schedule  # noqa: E402
from django_sqlqueue.run.execution import run_job  # noqa: E402
from django_sqlqueue.schedules import operations  # noqa: E402
from django_sqlqueue.worker.scheduler import Scheduler, SchedulerConfig  # noqa: E402
from tests.testapp import django_tasks as tasks  # noqa: E402

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)


def test_a_django_task_ticks_into_a_job_its_backend_runs(declared_schedules):
    schedule(every=60, args=[2, 3])(tasks.add)
    schedule(cron="*/5 * * * *", timezone="UTC", name="urgent", args=[1, 1], queue="emails")(
        tasks.add_urgent)
    operations.sync("default", now=T0)
    row = Schedule.objects.get(name="tests.testapp.django_tasks.add")
    assert row.task_name == "django.tasks:tests.testapp.django_tasks.add"
    assert row.payload == {"args": [2, 3], "kwargs": {}, "backend": "default"}
    urgent = Schedule.objects.get(name="urgent")
    assert (urgent.job_options["priority"], urgent.job_options["queue"]) == (10, "emails")

    Scheduler(SchedulerConfig(holder="w1"), alias="default").run_once(now=T0 + dt.timedelta(
        minutes=5))
    jobs = {job.schedule_name: job for job in Job.objects.all()}
    assert set(jobs) == {"tests.testapp.django_tasks.add", "urgent"}
    (claimed,) = Job.objects.filter(pk=jobs["tests.testapp.django_tasks.add"].pk).claim(
        None, "w1", now=T0 + dt.timedelta(minutes=5))
    assert run_job(claimed).outcome == "succeeded"
    claimed.refresh_from_db()
    assert claimed.result == 5 and claimed.payload["backend"] == "default"


def test_tasks_of_another_backend_or_a_queue_it_refuses_fail_at_declaration(
        declared_schedules):
    with pytest.raises(ImproperlyConfigured, match="not django-sqlqueue's SQLQueueBackend"):
        schedule(every=60, args=[1, 2])(tasks.immediate_add)
    with pytest.raises(InvalidTask):
        schedule(every=60, name="bad-queue", args=[1, 2], queue="nope")(tasks.add)
    assert not declared_schedules


def test_a_runtime_schedule_of_a_django_task():
    from django_sqlqueue.exceptions import InvalidPeriodicSchedule
    from django_sqlqueue.schedules.runtime import add_schedule, update_schedule

    row = add_schedule("sum", tasks.add, every=60, args=[2, 3], now=T0)
    assert (row.source, row.task_name, row.payload) == (
        "runtime", "django.tasks:tests.testapp.django_tasks.add",
        {"args": [2, 3], "kwargs": {}, "backend": "default"})
    with pytest.raises(InvalidPeriodicSchedule, match="passed as the task itself"):
        update_schedule("sum", args=[4, 5])  # its task is not a registered @job name
    assert update_schedule("sum", task=tasks.add, args=[4, 5]).payload["args"] == [4, 5]
    with pytest.raises(InvalidPeriodicSchedule, match="not django-sqlqueue's SQLQueueBackend"):
        add_schedule("other", tasks.immediate_add, every=60, args=[1, 2])
    Scheduler(SchedulerConfig(holder="w1"), alias="default").run_once(now=T0 + dt.timedelta(
        minutes=1))
    (job,) = Job.objects.all()
    assert job.schedule_name == "sum" and job.payload["args"] == [4, 5]
