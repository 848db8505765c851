"""A workflow in the admin (docs/workflows.md): the job page shows its workflow, its parents
and children with their states and what a waiting job waits for; the job list filters by
workflow."""

import re
from html import unescape

import pytest
from django.urls import reverse

from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.workflows import chain, chord
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", response.content.decode())))


def test_a_waiting_callback_shows_what_it_waits_for_and_its_parents(admin_client):
    flow = chord([add.s(1, 2), add.s(3, 4)], add.s(10)).enqueue()
    first, second, callback = flow.jobs
    (claimed, *_) = Job.objects.claim(None, "w", limit=1)
    run_job(claimed)
    page = text(admin_client.get(reverse("admin:django_sqlqueue_job_change",
                                         args=[callback.pk])))
    assert f"workflow {flow.id}" in page
    assert f"waiting for 1 of its 2 parents to finish : #{second.pk}" in page
    assert f"#{first.pk} tests.testapp.tasks.add Succeeded" in page
    assert f"#{second.pk} tests.testapp.tasks.add Queued" in page
    parent_page = text(admin_client.get(reverse("admin:django_sqlqueue_job_change",
                                                args=[first.pk])))
    assert f"children: #{callback.pk} tests.testapp.tasks.add Waiting for its parents" in (
        parent_page)


def test_the_job_list_filters_by_workflow(admin_client):
    flow = chord([add.s(1, 2), add.s(3, 4)], add.s(10)).enqueue()
    add.enqueue(5, 6)
    url = reverse("admin:django_sqlqueue_job_changelist")
    listed = admin_client.get(url, {"workflow": str(flow.id)}).context["cl"].result_list
    assert sorted(job.pk for job in listed) == sorted(job.pk for job in flow.jobs)
    assert len(admin_client.get(url, {"workflow": "any"}).context["cl"].result_list) == 3
    assert list(admin_client.get(url, {"workflow": "not-a-uuid"}).context["cl"].result_list) == []


def test_the_cancel_action_cancels_a_waiting_job_and_those_waiting_for_it(admin_client):
    flow = chain(add.s(1, 2), add.s(3), add.s(4)).enqueue()
    url = reverse("admin:django_sqlqueue_job_changelist")
    admin_client.post(url, {"action": "cancel", "_selected_action": [flow.jobs[1].pk]})
    statuses = dict(Job.objects.values_list("pk", "status"))
    assert [statuses[job.pk] for job in flow.jobs] == ["queued", "cancelled", "cancelled"]
