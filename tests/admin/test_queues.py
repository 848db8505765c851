"""The queues page: pauses and limits, what ready jobs wait for, and pause/resume behind their
own permission; the dashboard shows paused queues and limits."""

import pytest
from django.urls import reverse

from django_sqlqueue.models import Job, Queue
from django_sqlqueue.queues import control
from tests.admin.users import make_staff
from tests.testapp.tasks import add, send_email

pytestmark = pytest.mark.django_db
LIST = reverse("admin:django_sqlqueue_queue_changelist")


def test_the_list_shows_limits_and_who_waits_on_which_limit(client):
    control.set_limits("default", concurrency_limit=1, key_concurrency_limit=1)
    add.using(concurrency_key="customer-7").enqueue(1, 1)
    add.using(concurrency_key="customer-7").enqueue(2, 2)
    Job.objects.claim(None, "w")
    control.pause("emails", by="alice")
    send_email.enqueue("x@example.com")
    client.force_login(make_staff("viewer", "view_queue"))
    page = client.get(LIST).content.decode()
    assert "1 running; per key: 1 running" in page
    assert "concurrency limit (1 running); key customer-7: concurrency limit (1 running)" in page
    assert "paused</strong> by alice" in page
    assert "Pause the selected queues" not in page  # no permission: no actions


def test_pause_and_resume_need_their_permission(client):
    row = control.set_limits("emails", concurrency_limit=2)
    client.force_login(make_staff("viewer", "view_queue"))
    client.post(LIST, {"action": "pause_queues", "_selected_action": [row.pk]})
    assert not Queue.objects.get(pk=row.pk).is_paused
    client.force_login(make_staff("op", "view_queue", "pause_queue"))
    client.post(LIST, {"action": "pause_queues", "_selected_action": [row.pk]})
    row.refresh_from_db()
    assert row.is_paused and row.paused_by == "op"
    client.post(LIST, {"action": "resume_queues", "_selected_action": [row.pk]})
    assert not Queue.objects.get(pk=row.pk).is_paused


def test_limits_are_edited_on_the_queue_page(client):
    row = control.set_limits("emails", concurrency_limit=2)
    client.force_login(make_staff("op", "view_queue", "change_queue"))
    url = reverse("admin:django_sqlqueue_queue_change", args=[row.pk])
    response = client.post(url, {"name": "emails", "concurrency_limit": "", "rate_limit": "10",
                                 "rate_period_seconds": "60", "key_concurrency_limit": "1",
                                 "key_rate_limit": ""})
    assert response.status_code == 302, response.content.decode()
    assert Queue.objects.get(pk=row.pk).describe_limits() == (
        "10 starts per 60 s; per key: 1 running")


def test_the_dashboard_shows_paused_queues_and_limits(client):
    control.pause("emails")
    control.set_limits("default", rate_limit=5)
    send_email.enqueue("x@example.com")
    add.enqueue(1, 1)
    client.force_login(make_staff("viewer", "view_job"))
    page = client.get(reverse("admin:django_sqlqueue_job_dashboard")).content.decode()
    emails = page[page.index(">emails<"):]
    emails = emails[:emails.index("</tr>")]  # its row of the queues table
    assert ">paused<" in emails
    default = page[page.index(">default<"):]
    assert "5 starts per 1 s" in default[:default.index("</tr>")]


def test_fair_shares_and_weights_are_set_on_the_queue_page(client):
    row = control.set_limits("emails", concurrency_limit=2)
    client.force_login(make_staff("op", "view_queue", "change_queue"))
    url = reverse("admin:django_sqlqueue_queue_change", args=[row.pk])
    fields = {"name": "emails", "concurrency_limit": "2", "rate_limit": "",
              "rate_period_seconds": "1", "key_concurrency_limit": "", "key_rate_limit": ""}
    response = client.post(url, {**fields, "fair": "on", "key_weights": '{"gold": 0}'})
    assert "must be a number above 0" in response.content.decode()  # refused, with the fix
    assert not Queue.objects.get(pk=row.pk).fair
    response = client.post(url, {**fields, "fair": "on", "key_weights": '{"gold": 3}'})
    assert response.status_code == 302, response.content.decode()
    row.refresh_from_db()
    assert (row.fair, row.key_weights) == (True, {"gold": 3})
    assert "fair shares per key (weights gold=3)" in client.get(LIST).content.decode()
    response = client.post(url, {**fields, "key_weights": ""})  # fair off, weights cleared
    assert response.status_code == 302, response.content.decode()
    row.refresh_from_db()
    assert (row.fair, row.key_weights) == (False, {})


def test_the_list_says_it_holds_only_queues_given_a_pause_or_a_limit(client):
    """With jobs in two queues and no Queue row, the page says "0 queues": it says why."""
    add.enqueue(1, 1)
    send_email.enqueue("x@example.com")
    client.force_login(make_staff("viewer", "view_queue", "view_job"))
    page = client.get(LIST).content.decode()
    assert "0 queues" in page
    assert ("Only the queues given a pause or a limit are listed here; every other queue runs "
            "freely. Every queue with jobs is on the <a href=\"/admin/django_sqlqueue/job/"
            "dashboard/\">queue dashboard</a>.") in page
