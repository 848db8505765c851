"""The admin's forms for run-time schedules (admin/schedule_form.py), through Django's test
client: add, edit and delete behind add/change/delete_schedule, checked by the run-time API's
own checks; schedules declared in code stay read-only and say so."""

import pytest
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue import schedule
from django_sqlqueue.models import Schedule
from django_sqlqueue.schedules import operations
from django_sqlqueue.schedules.runtime import add_schedule
from tests.admin.users import make_staff
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db
ADD = reverse("admin:django_sqlqueue_schedule_add")


def change_url(row):
    return reverse("admin:django_sqlqueue_schedule_change", args=[row.pk])


def delete_url(row):
    return reverse("admin:django_sqlqueue_schedule_delete", args=[row.pk])


def staff(client, *codenames):
    client.force_login(make_staff("someone", "view_schedule", *codenames))
    return client


def form(**changes):
    data = {"name": "report", "task": "tests.testapp.tasks.add", "cron": "",
            "every_seconds": "90", "timezone": "UTC", "args": "[1, 2]", "kwargs": "{}",
            "queue": "", "priority": "", "missed": "latest", "catch_up": "",
            "grace_seconds": "60", "_save": "Save"}
    return {**data, **changes}


@pytest.fixture
def in_code(declared_schedules):
    schedule(every=120, name="in-code", args=[1, 2])(add)
    operations.sync("default", now=timezone.now())
    return Schedule.objects.get(name="in-code")


def test_adding_a_schedule_writes_a_runtime_row(client):
    page = staff(client, "add_schedule").get(ADD).content.decode()
    assert '<option value="tests.testapp.tasks.add">' in page  # the registered tasks
    assert 'name="cron"' in page and 'name="every_seconds"' in page
    response = client.post(ADD, form())
    assert response.status_code == 302, response.content.decode()
    row = Schedule.objects.get(name="report")
    assert (row.source, row.every_seconds, row.cron, row.payload) == (
        "runtime", 90, "", {"args": [1, 2], "kwargs": {}})
    assert row.job_options["queue"] == "default" and row.next_run_at is not None
    cron = client.post(ADD, form(name="nightly", cron="0 3 * * *", every_seconds="",
                                 timezone="Europe/Paris", missed="catch_up", catch_up="3"))
    assert cron.status_code == 302, cron.content.decode()
    nightly = Schedule.objects.get(name="nightly")
    assert (nightly.cron, nightly.timezone, nightly.missed, nightly.catch_up) == (
        "0 3 * * *", "Europe/Paris", "catch_up", 3)


@pytest.mark.parametrize(("changes", "words"), [
    ({"cron": "61 * * * *", "every_seconds": ""}, "61"),
    ({"cron": "@daily"}, "cron"),
    ({"every_seconds": ""}, "give cron=... or every=..."),
    ({"cron": "@daily", "every_seconds": "", "timezone": "Mars/Olympus"}, "Mars/Olympus"),
    ({"queue": "no spaces"}, "queue"),
    ({"name": "in-code"}, "declared in code"),
    ({"task": "os.system"}, "Select a valid choice"),
])
def test_the_add_form_refuses_what_the_api_refuses(client, in_code, changes, words):
    response = staff(client, "add_schedule").post(ADD, form(**changes))
    assert response.status_code == 200
    assert words in response.content.decode()
    assert list(Schedule.objects.values_list("name", flat=True)) == ["in-code"]


def test_editing_a_runtime_schedule_goes_through_update_schedule(client):
    row = add_schedule("report", add, every=60, args=[1, 2])
    page = staff(client, "change_schedule").get(change_url(row)).content.decode()
    assert 'name="every_seconds"' in page and "created at run time" in page
    response = client.post(change_url(row), form(every_seconds="", cron="*/5 * * * *",
                                                 args="[3, 4]", priority="7"))
    assert response.status_code == 302, response.content.decode()
    edited = Schedule.objects.get(pk=row.pk)
    assert (edited.cron, edited.every_seconds, edited.payload["args"]) == (
        "*/5 * * * *", None, [3, 4])
    assert edited.job_options["priority"] == 7 and edited.version == row.version + 1
    refused = client.post(change_url(row), form(cron="bad", every_seconds=""))
    assert refused.status_code == 200 and Schedule.objects.get(pk=row.pk).cron == "*/5 * * * *"


def test_a_declared_schedule_stays_read_only_and_says_declared_in_code(client, in_code):
    user = staff(client, "add_schedule", "change_schedule", "delete_schedule")
    page = user.get(change_url(in_code)).content.decode()
    assert "declared in code" in page and 'name="every_seconds"' not in page
    assert user.post(change_url(in_code), form(name="in-code")).status_code == 403
    assert user.post(delete_url(in_code), {"post": "yes"}).status_code == 403
    assert Schedule.objects.get(pk=in_code.pk).version == in_code.version


def test_deleting_a_runtime_schedule_removes_it(client):
    row = add_schedule("report", add, every=60)
    assert staff(client).post(delete_url(row), {"post": "yes"}).status_code == 403
    user = make_staff("deleter", "view_schedule", "delete_schedule")
    client.force_login(user)
    assert client.post(delete_url(row), {"post": "yes"}).status_code == 302
    assert not Schedule.objects.exists()


def test_without_the_permissions_nothing_changes(client):
    row = add_schedule("report", add, every=60)
    user = staff(client)
    assert user.post(ADD, form(name="other")).status_code == 403
    assert user.post(change_url(row), form(every_seconds="30")).status_code == 403
    page = user.get(change_url(row)).content.decode()
    assert 'name="every_seconds"' not in page  # a view-only page
    assert list(Schedule.objects.values_list("every_seconds", flat=True)) == [60]
