"""The job list by tag: the tag filter (the tags of recent jobs) and ``tag:NAME`` in the search
box; a job's page shows its tags, metadata and unique slot."""

import pytest
from django.urls import reverse

from django_sqlqueue.models import Job
from tests.factories import JobFactory
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db
LIST = reverse("admin:django_sqlqueue_job_changelist")


def listed(response):
    return sorted(job.pk for job in response.context["cl"].result_list)


def test_filter_and_search_by_tag(admin_client):
    billing = JobFactory(tags=["billing", "eu"])
    eu = JobFactory(tags=["eu"])
    JobFactory()
    html = admin_client.get(LIST).content.decode()
    assert "?tag=billing" in html and "?tag=eu" in html  # choices from the recent jobs' tags
    assert listed(admin_client.get(LIST, {"tag": "eu"})) == [billing.pk, eu.pk]
    assert listed(admin_client.get(LIST, {"tag": "billing", "q": "tag:eu"})) == [billing.pk]
    assert listed(admin_client.get(LIST, {"q": "tag:billing"})) == [billing.pk]
    assert listed(admin_client.get(LIST, {"q": "tag:bill"})) == []  # a tag, not a substring
    html = admin_client.get(LIST, {"tag": "old-tag"}).content.decode()
    assert "old-tag" in html  # selected, though no recent job has it


def test_a_job_s_page_shows_tags_metadata_and_slot(admin_client):
    job = add.using(tags=["billing", "eu"], metadata={"invoice": 1042}, unique_key="inv-1042",
                    unique_states=["queued", "running", "failed", "succeeded"]).enqueue(1, 2)
    html = admin_client.get(reverse("admin:django_sqlqueue_job_change", args=[job.pk])).content
    html = html.decode()
    assert "billing, eu" in html and "&quot;invoice&quot;: 1042" in html and "inv-1042" in html
    assert listed(admin_client.get(LIST, {"q": "inv-104"})) == [job.pk]
    assert Job.objects.get(pk=job.pk).unique_slot == "inv-1042"
