"""The event stream of a job's progress (views.job_events, views.stream_job_events): who may
follow a job, the events a follower reads as the row changes, and how the stream ends.

The stream's sleep is injected: each "sleep" changes the row as a worker would, so the events
follow from construction, not from timing."""

import json

import pytest
from django.contrib.auth.models import User
from django.http import Http404
from django.urls import reverse

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.views import stream_job_events
from tests.admin.users import make_staff
from tests.factories import claimed_job

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def urls(settings):
    settings.ROOT_URLCONF = "tests.integration.metrics_urls"


def events(response) -> list:
    """[(event name, data)] of a text/event-stream response."""
    assert response["Content-Type"] == "text/event-stream"
    text = b"".join(response.streaming_content).decode()
    found = []
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines()
                     if line and not line.startswith((":", "retry:")))
        if lines:
            found.append((lines["event"], json.loads(lines["data"])))
    return found


def finished_job(result=None):
    job = claimed_job()
    Job.objects.filter(pk=job.pk).update(progress_done=10, progress_total=10,
                                         progress_message="done", progress_at=job.claimed_at)
    assert job.complete(result)
    return job


def url(job):
    return reverse("django_sqlqueue:job_events", args=[job.pk])


def test_staff_with_the_view_permission_follow_a_job_to_its_result(client):
    job = finished_job({"rows": 10})
    client.force_login(make_staff("ops", "view_job"))
    response = client.get(url(job))
    assert response.status_code == 200
    [(first, progress), (last, final)] = events(response)
    assert first == "progress" and progress["status"] == "succeeded"
    assert progress["progress"]["done"] == 10 and progress["progress"]["percent"] == 100
    assert last == "finished" and final["status"] == "succeeded"
    assert final["result"] == {"rows": 10} and final["progress"]["message"] == "done"


@pytest.mark.parametrize("who", ["anonymous", "staff without the permission", "not staff"])
def test_everyone_else_is_refused(client, who):
    job = finished_job()
    if who == "staff without the permission":
        client.force_login(make_staff("someone", "change_queue"))
    elif who == "not staff":
        user = make_staff("someone", "view_job")
        User.objects.filter(pk=user.pk).update(is_staff=False)
        client.force_login(user)
    assert client.get(url(job)).status_code == 403


def test_a_missing_job_is_404(admin_client):
    assert admin_client.get(
        reverse("django_sqlqueue:job_events", args=[987654])).status_code == 404
    with pytest.raises(Http404):
        stream_job_events(987654)


def test_a_follower_sees_each_change_once_then_the_final_state():
    job = Job.objects.enqueue("tests.testapp.tasks.add", [1, 2])
    rows = Job.objects.filter(pk=job.pk)
    claimed = []

    def steps():  # what a worker does between two polls
        yield lambda: claimed.append(Job.objects.claim(None, "w1")[0])
        yield lambda: None  # nothing changed: no event
        yield lambda: rows.update(progress_done=1, progress_total=4, progress_message="one",
                                  progress_at=job.enqueued_at)
        yield lambda: rows.update(progress_done=4, progress_message="four")
        yield lambda: claimed[0].fail(RuntimeError("boom"), retry=False)

    changes = steps()
    response = stream_job_events(job.pk, sleep=lambda seconds: next(changes)())
    seen = [(name, data["status"], (data["progress"] or {}).get("percent"))
            for name, data in events(response)]
    assert seen == [
        ("progress", "queued", None), ("progress", "running", None),
        ("progress", "running", 25), ("progress", "running", 100),
        ("progress", "exhausted", 100), ("finished", "exhausted", 100),
    ]
    assert "result" not in events(stream_job_events(job.pk))[-1][1]  # not asked for


def test_the_stream_ends_after_its_longest_time_without_a_final_event():
    job = Job.objects.enqueue("tests.testapp.tasks.add", [1, 2])
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds

    response = stream_job_events(job.pk, poll_seconds=10, max_seconds=60, keepalive_seconds=25,
                                 sleep=sleep, clock=lambda: now[0])
    text = b"".join(response.streaming_content).decode()
    # Polls at 0, 10 ... 60 s: one event (nothing changed after the first), a comment after
    # 25 s of quiet (at 30 s), and the end at 60 s, with no final event.
    assert text.count("event: progress") == 1 and "event: finished" not in text
    assert text.count(": keep-alive") == 1
    assert now[0] == 60


def test_a_job_deleted_while_followed_ends_the_stream():
    job = Job.objects.enqueue("tests.testapp.tasks.add", [1, 2])
    response = stream_job_events(job.pk, sleep=lambda seconds: Job.objects.filter(
        pk=job.pk).delete())
    assert [(name, data["status"]) for name, data in events(response)] == [
        ("progress", JobStatus.QUEUED), ("finished", None)]
