"""The schedules page: each schedule's timing in words, time zone, next five runs, last run
and outcome; pause, resume and run now behind their own permissions; nothing editable."""

import datetime as dt

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue import schedule
from django_sqlqueue.models import Job, Schedule
from django_sqlqueue.schedules import operations
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.scheduler import Scheduler, SchedulerConfig
from tests.admin.users import make_staff
from tests.testapp.tasks import add, send_email

pytestmark = pytest.mark.django_db
LIST = reverse("admin:django_sqlqueue_schedule_changelist")


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def schedules(declared_schedules):
    schedule(cron="30 2 * * *", timezone="Europe/Berlin", name="nightly",
             kwargs={"to": "ops@example.com"})(send_email)
    schedule(every=120, name="often", args=[1, 2])(add)
    now = timezone.now()
    operations.sync("default", now=now)
    rows = {row.name: row for row in Schedule.objects.all()}
    # "often" ran once: its job succeeded.
    often = rows["often"]
    Schedule.objects.filter(name="often").update(
        next_run_at=often.next_run_at - dt.timedelta(seconds=120))
    Scheduler(SchedulerConfig(holder="web-1:42:abc"), alias="default").run_once(now=now)
    Job.objects.update(status=JobStatus.SUCCEEDED, finished_at=now)
    return rows


def staff(client, *codenames):
    user = make_staff("someone", "view_schedule", "view_job", *codenames)
    client.force_login(user)
    return client


def test_the_list_shows_timing_time_zone_next_runs_and_the_last_outcome(client, schedules):
    page = staff(client).get(LIST).content.decode()
    assert "At 02:30 every day (30 2 * * *)" in page
    assert "Europe/Berlin" in page and "no time zone" in page
    assert "Every 2 minutes" in page
    nightly = Schedule.objects.get(name="nightly")
    ticks = nightly.next_runs(5, now=timezone.now())
    assert len(ticks) == 5
    for tick in ticks:  # in the schedule's own time zone
        local = tick.astimezone(nightly.timetable.zone)
        assert f'<span class="sq-weekday">{local:%a} </span>{local:%d %b %H:%M %Z}' in page
    often = Schedule.objects.get(name="often")
    assert f"#{often.last_job_id}" in page and "Succeeded" in page
    assert "never" in page  # nightly has not run yet
    assert "Pause (no ticks until resumed)" not in page  # no permission: no actions


def test_a_schedules_page_is_read_only_and_shows_its_buttons_by_permission(client, schedules):
    often = Schedule.objects.get(name="often")
    url = reverse("admin:django_sqlqueue_schedule_change", args=[often.pk])
    page = staff(client).get(url).content.decode()
    assert "web-1:42:abc" in page and ">Run now<" not in page
    assert '<input type="text"' not in page and "<select" not in page  # nothing to edit
    client.force_login(make_staff("op", "view_schedule", "pause_schedule", "run_schedule_now"))
    page = client.get(url).content.decode()
    assert ">Run now<" in page and ">Pause<" in page and ">Resume<" not in page
    assert client.post(url.replace("change/", "delete/")).status_code == 403  # not retired


def test_pause_resume_and_run_now_each_need_their_permission(client, schedules):
    often = Schedule.objects.get(name="often")
    staff(client)
    response = client.post(LIST, {"action": "pause", "_selected_action": [often.pk]})
    assert response.status_code == 200  # the action is not offered: nothing happens
    assert Schedule.objects.get(pk=often.pk).state == "active"
    act = reverse("admin:django_sqlqueue_schedule_act", args=[often.pk, "run_now"])
    assert client.post(act).status_code == 403
    assert Job.objects.count() == 1


def test_pausing_and_resuming_from_the_list_say_what_changed(client, schedules):
    staff(client, "pause_schedule")
    ids = list(Schedule.objects.values_list("pk", flat=True))
    response = client.post(LIST, {"action": "pause", "_selected_action": ids}, follow=True)
    assert messages_of(response) == ["2 schedules paused."]
    assert set(Schedule.objects.values_list("paused_by", flat=True)) == {"admin:someone"}
    response = client.post(LIST, {"action": "pause", "_selected_action": ids}, follow=True)
    assert messages_of(response) == ["2 schedules skipped: they were already paused, or "
                                     "retired."]
    page = client.get(LIST).content.decode()
    assert "(once resumed)" in page
    response = client.post(LIST, {"action": "resume", "_selected_action": ids[:1]}, follow=True)
    assert messages_of(response) == ["1 schedule resumed."]
    assert sorted(Schedule.objects.values_list("paused_at", flat=True), key=bool)[0] is None


def test_run_now_enqueues_a_job_at_once_and_links_it(client, schedules):
    staff(client, "run_schedule_now")
    nightly = Schedule.objects.get(name="nightly")
    act = reverse("admin:django_sqlqueue_schedule_act", args=[nightly.pk, "run_now"])
    response = client.post(act, follow=True)
    job = Job.objects.get(payload__schedule__name="nightly")
    job_url = reverse("admin:django_sqlqueue_job_change", args=[job.pk])
    assert messages_of(response) == [
        f'Schedule nightly enqueued job <a href="{job_url}">#{job.pk}</a>.']
    assert job.payload["schedule"]["by"] == "admin:someone"
    assert job.payload["schedule"]["manual"] is True
    assert job.kwargs == {"to": "ops@example.com"} and job.queue == "emails"
    nightly.refresh_from_db()
    assert (nightly.last_job_id, nightly.runs) == (job.pk, 1)


def test_retired_schedules_can_be_deleted_and_no_longer_run(client, schedules,
                                                            declared_schedules):
    declared_schedules.pop("nightly")
    operations.sync("default")
    nightly = Schedule.objects.get(name="nightly")
    client.force_login(make_staff("op", "view_schedule", "run_schedule_now", "delete_schedule"))
    response = client.post(LIST, {"action": "run_now", "_selected_action": [nightly.pk]},
                           follow=True)
    assert messages_of(response) == ["1 schedule skipped: retired schedules no longer run."]
    page = client.get(f"{LIST}?state=retired").content.decode()
    assert "nightly" in page and "often" not in page
    delete = reverse("admin:django_sqlqueue_schedule_delete", args=[nightly.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 302
    assert not Schedule.objects.filter(name="nightly").exists()
