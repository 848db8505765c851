"""The job page: read-only, everything needed to understand what happened to the job."""

import datetime as dt
import re
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.models import Job
from tests.factories import JobFactory, WorkerFactory

pytestmark = pytest.mark.django_db


def change_url(job):
    return reverse("admin:django_sqlqueue_job_change", args=[job.pk])


def act_url(job, action):
    return reverse("admin:django_sqlqueue_job_act", args=[job.pk, action])


@pytest.fixture
def exhausted_job():
    started = timezone.now() - dt.timedelta(minutes=5)
    return JobFactory(
        exhausted=True, task_name="shop.tasks.charge_card", queue="billing", unique_key="order:7",
        payload={"args": [7], "kwargs": {"amount": "12.50", "note": "<script>"}},
        attempts=2, max_attempts=2, claimed_by="web-1:42:abc", claimed_at=started,
        finished_at=started + dt.timedelta(seconds=3), result={"partial": True},
        errors=[
            {"attempt": 1, "at": "2026-01-02T03:04:05+00:00", "type": "builtins.TimeoutError",
             "message": "card service timed out", "traceback": "Traceback: first attempt",
             "worker": "web-1:41:aaa"},
            {"attempt": 2, "at": "2026-01-02T03:05:05+00:00", "type": "shop.CardDeclined",
             "message": "declined <b>", "traceback": 'File "shop/tasks.py", line 9',
             "worker": "web-1:42:abc"},
        ],
    )


def test_shows_payload_result_errors_timings_and_worker(admin_client, exhausted_job):
    raw = admin_client.get(change_url(exhausted_job)).content.decode()
    assert "&lt;script&gt;" in raw and "&lt;b&gt;" in raw and '<script>"' not in raw  # escaped
    html = unescape(raw)
    # pretty-printed JSON
    assert '"kwargs": {\n    "amount": "12.50",' in html
    assert '"partial": true' in html
    # every attempt, newest first, with its traceback
    assert html.index("CardDeclined") < html.index("TimeoutError")
    assert "declined <b>" in html and "card service timed out" in html
    assert "Traceback: first attempt" in html
    assert 'File "shop/tasks.py", line 9' in html
    assert "Attempt 2" in html and "worker web-1:41:aaa" in html
    # timings and attempts
    assert "3.0 s" in html  # duration of the last attempt
    claimed = " ".join(html[html.index("Claimed (latest attempt):"):][:1000].split())
    assert " UTC " in claimed and re.search(r"\(5 m 0[01] s ago\)", claimed)
    assert "2 of 2" in html
    assert "backoff" in html
    # the worker that ran it, gone now
    assert "web-1:42:abc" in html and "no longer registered" in html


def test_a_registered_worker_shows_its_heartbeat(admin_client, exhausted_job):
    WorkerFactory(name="web-1:42:abc")
    html = admin_client.get(change_url(exhausted_job)).content.decode()
    assert "registered now, last heartbeat" in html


def test_a_job_without_errors_or_worker(admin_client):
    html = admin_client.get(change_url(JobFactory())).content.decode()
    assert "No failed or interrupted attempts." in html and "never claimed" in html


def test_an_interruption_is_shown_apart_from_failures(admin_client):
    job = JobFactory(failed=True, attempts=2, max_attempts=2, interruptions=1, errors=[
        {"attempt": 1, "at": "2026-01-01T00:00:00+00:00", "worker": "w:1:a",
         "type": "django_sqlqueue.run.outcomes.WorkerLost", "traceback": "", "interrupted": True,
         "message": "worker w:1:a was lost while running attempt 1 (its lease expired); "
                    "interruption 1 of 3: the job runs again, the attempt not counted."},
        {"attempt": 2, "at": "2026-01-01T00:01:00+00:00", "worker": "w:2:b",
         "type": "builtins.ValueError", "message": "bad value", "traceback": ""},
    ])
    html = admin_client.get(change_url(job)).content.decode()
    assert "2 of 2 (1 interrupted, of at most 3)" in html
    assert html.count('class="sq-interrupted"') == 1  # the lost worker's entry, not the failure
    assert html.index("interruption 1 of 3") > html.index("bad value")  # newest first


def test_malformed_error_entries_do_not_break_the_page(admin_client):
    job = JobFactory(failed=True, errors=[{"message": "no time"}, "not a dict", {"at": "junk"}])
    response = admin_client.get(change_url(job))
    assert response.status_code == 200
    assert "no time" in response.content.decode()


def test_the_page_is_read_only(admin_client, exhausted_job):
    response = admin_client.get(change_url(exhausted_job))
    html = response.content.decode()
    assert 'name="_save"' not in html and 'name="task_name"' not in html
    assert response.context["adminform"].form.fields == {}  # no editable field at all
    posted = admin_client.post(change_url(exhausted_job), {"task_name": "os.system"})
    assert posted.status_code == 403
    assert Job.objects.get(pk=exhausted_job.pk).task_name == "shop.tasks.charge_card"


def test_buttons_follow_the_permissions(client, staff_user, operator):
    job = JobFactory(failed=True)
    client.force_login(staff_user)
    html = client.get(change_url(job)).content.decode()
    assert "Retry now" not in html and "Cancel job" not in html
    client.force_login(operator)
    html = client.get(change_url(job)).content.decode()
    for action in ("retry_now", "run_now", "cancel"):
        assert act_url(job, action) in html


def test_only_buttons_that_can_apply_to_the_job_are_offered(client, operator, exhausted_job):
    client.force_login(operator)
    html = client.get(change_url(exhausted_job)).content.decode()
    assert act_url(exhausted_job, "retry_now") in html
    assert act_url(exhausted_job, "cancel") not in html
    assert act_url(exhausted_job, "run_now") not in html
    running = JobFactory(running=True)
    html = client.get(change_url(running)).content.decode()
    assert "Retry now" not in html and "Run now" not in html
    assert act_url(running, "cancel") in html  # a running job can be asked to stop
    response = client.post(act_url(running, "cancel"), follow=True)
    assert "waiting for its worker to stop it" in response.content.decode()
    assert act_url(running, "cancel") not in response.content.decode()  # asked once is enough


def test_retry_button(client, operator, exhausted_job):
    client.force_login(operator)
    response = client.post(act_url(exhausted_job, "retry_now"), follow=True)
    assert response.redirect_chain[-1][0] == change_url(exhausted_job)
    assert Job.objects.get(pk=exhausted_job.pk).status == "queued"
    assert "1 job queued again, due now." in response.content.decode()


def test_cancel_button_on_a_finished_job_explains_the_skip(client, operator, exhausted_job):
    client.force_login(operator)
    response = client.post(act_url(exhausted_job, "cancel"), follow=True)
    html = response.content.decode()
    assert "1 job skipped: 1 exhausted (only jobs that have not finished" in html
    assert Job.objects.get(pk=exhausted_job.pk).status == "exhausted"


def test_buttons_refuse_what_the_user_may_not_do(client, staff_user, exhausted_job):
    client.force_login(staff_user)
    assert client.post(act_url(exhausted_job, "retry_now")).status_code == 403
    assert Job.objects.get(pk=exhausted_job.pk).status == "exhausted"


def test_buttons_need_post_a_known_action_and_an_existing_job(client, operator, exhausted_job):
    client.force_login(operator)
    assert client.get(act_url(exhausted_job, "retry_now")).status_code == 405
    assert client.post(act_url(exhausted_job, "delete_selected")).status_code == 403
    assert client.post(act_url(exhausted_job, "nonsense")).status_code == 403
    missing = reverse("admin:django_sqlqueue_job_act", args=[999999, "retry_now"])
    assert client.post(missing).status_code == 404
    bad_id = reverse("admin:django_sqlqueue_job_act", args=["abc", "retry_now"])
    assert client.post(bad_id).status_code == 404
    assert Job.objects.get(pk=exhausted_job.pk).status == "exhausted"


def test_delete_from_the_job_page_needs_the_delete_permission(client, staff_user, operator):
    job = JobFactory(succeeded=True)
    delete_url = reverse("admin:django_sqlqueue_job_delete", args=[job.pk])
    client.force_login(staff_user)
    assert client.post(delete_url, {"post": "yes"}).status_code == 403
    assert Job.objects.filter(pk=job.pk).exists()
    client.force_login(operator)
    assert client.post(delete_url, {"post": "yes"}).status_code == 302
    assert not Job.objects.filter(pk=job.pk).exists()


def test_a_transactional_job_says_so(admin_client):
    job = JobFactory(transactional=True, timeout_seconds=30)
    html = admin_client.get(change_url(job)).content.decode()
    assert re.search(r"Transactional:</label>\s*<div[^>]*>\s*<img[^>]*alt=\"True\"", html), html
