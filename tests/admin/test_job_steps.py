"""The job page lists the job's durable steps (docs/steps.md): name, result, attempt, times."""

import datetime as dt
import re
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.admin import step_detail
from django_sqlqueue.models import Job, JobStep
from django_sqlqueue.statuses import JobStatus
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


def change_url(job):
    return reverse("admin:django_sqlqueue_job_change", args=[job.pk])


def test_the_job_page_lists_its_steps_in_order_with_results_and_times(admin_client):
    job = JobFactory(status=JobStatus.SUCCEEDED, attempts=2)
    started = timezone.now() - dt.timedelta(minutes=3)
    for n, (name, result, attempt) in enumerate(
            [("reserve", {"sku": "<b>mug</b>", "qty": 2}, 1), ("charge", "ch_42", 2)]):
        JobStep.objects.create(job=job, name=name, result=result, attempt=attempt,
                               started_at=started + dt.timedelta(seconds=n),
                               finished_at=started + dt.timedelta(seconds=n, milliseconds=250),
                               duration_seconds=0.25)
    raw = admin_client.get(change_url(job)).content.decode()
    assert "&lt;b&gt;mug" in raw and "<b>mug" not in raw  # escaped
    table = unescape(re.search(r'<table class="sq-steps">.*?</table>', raw, re.DOTALL).group(0))
    cells = [re.findall(r"<td>(?:<code[^>]*>)?(.*?)(?:</code>)?</td>", row)
             for row in re.findall(r"<tr><td>.*?</tr>", table)]
    assert [(c[0], c[1], c[2], c[5]) for c in cells] == [
        ("reserve", '{"qty": 2, "sku": "<b>mug</b>"}', "1", "250 ms"),
        ("charge", '"ch_42"', "2", "250 ms"),
    ]
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", c[3]) for c in cells)


def test_a_job_without_steps_says_so(admin_client):
    html = admin_client.get(change_url(JobFactory())).content.decode()
    assert "No durable steps recorded" in html


def test_a_job_with_many_steps_lists_the_first_ones(admin_client, monkeypatch):
    monkeypatch.setattr(step_detail, "MAX_STEPS", 3)
    job = JobFactory()
    JobStep.objects.bulk_create(JobStep(job=job, name=f"item-{n}", result=n) for n in range(5))
    html = admin_client.get(change_url(job)).content.decode()
    assert "item-2" in html and "item-3" not in html
    assert "The first 3 steps; the job has more." in html


def test_deleting_a_job_in_the_admin_deletes_its_steps(admin_client):
    job = JobFactory(status=JobStatus.SUCCEEDED)
    JobStep.objects.create(job=job, name="only", result=1)
    response = admin_client.post(reverse("admin:django_sqlqueue_job_changelist"), {
        "action": "delete_selected", "_selected_action": [job.pk], "post": "yes"}, follow=True)
    assert "1 job deleted." in response.content.decode()
    assert not Job.objects.exists() and not JobStep.objects.exists()
