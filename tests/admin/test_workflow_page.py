"""The workflow page (docs/workflows.md#in-the-admin): a workflow's jobs in layers with their
states and why the blocked ones wait or were cancelled; a big one summed up, in as many queries
as a small one; its actions, "Cancel workflow" and "Retry failed jobs", confirmed first, each
only for users with the permission of the list's action."""

import re
from html import unescape

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from django_sqlqueue.admin.workflow_graph import MAX_NODES_PER_LAYER
from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.workflows import chain, chord
from tests.admin.demo_data import seed_workflow
from tests.admin.users import make_staff
from tests.support.draining import drain
from tests.testapp.tasks import flow_step

pytestmark = pytest.mark.django_db


def text(response) -> str:
    html = response.content.decode().replace("<wbr>", "")  # where a task's name may wrap
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def page_url(flow) -> str:
    return reverse("admin:django_sqlqueue_job_workflow", args=[flow.id])


def act_url(flow, action) -> str:
    return reverse("admin:django_sqlqueue_job_workflow_act", args=[flow.id, action])


def statuses(flow) -> list:
    by_pk = dict(Job.objects.filter(workflow_id=flow.id).values_list("pk", "status"))
    return [by_pk[job.pk] for job in flow.jobs]


def failing_chain():
    """a fails for good (one attempt), which cancels b, which cancels c."""
    flow = chain(flow_step.using(max_attempts=1).s(tag="a", fail=True), flow_step.s(tag="b"),
                 flow_step.s(tag="c")).enqueue()
    drain()
    return flow


def test_the_page_draws_each_layer_with_states_and_why_a_job_waits(admin_client):
    flow = chord([flow_step.s(tag=f"m{n}") for n in range(3)], flow_step.s(tag="cb")).enqueue()
    (first, *_) = Job.objects.claim(None, "w", limit=1)
    run_job(first)
    page = text(admin_client.get(page_url(flow)))
    members, callback = flow.jobs[:3], flow.jobs[3]
    assert "4 jobs, 3 unfinished" in page
    assert "Layer 0 3 jobs" in page and "Layer 1 1 job" in page
    assert f"#{members[0].pk} tests.flow_step Succeeded attempts 1 of 5" in page
    assert f"#{members[1].pk} tests.flow_step Queued attempts 0 of 5" in page
    assert (f"#{callback.pk} tests.flow_step Waiting for its parents attempts 0 of 5 after "
            f"#{members[0].pk}, #{members[1].pk}, #{members[2].pk} waiting for 2 of 3 parents "
            f"(2 queued)") in page


def test_a_cancelled_job_says_which_parent_ended_how(admin_client):
    flow = failing_chain()
    a, b, c = flow.jobs
    response = admin_client.get(page_url(flow))
    page = text(response)
    assert "Layer 0 1 job" in page and "Layer 2 1 job" in page
    assert f"#{a.pk} tests.flow_step Exhausted attempts 1 of 1" in page
    assert f"#{b.pk} tests.flow_step Cancelled attempts 0 of 5 after #{a.pk} parent #{a.pk} " \
           "ended exhausted" in page
    assert f"parent #{b.pk} ended cancelled" in page
    job_url = reverse("admin:django_sqlqueue_job_change", args=[a.pk])
    assert f'parent <a href="{job_url}">#{a.pk}</a>' in response.content.decode()


def test_a_big_chord_is_summed_up_in_as_many_queries_as_a_small_one(admin_client):
    small = chord([flow_step.s(tag=f"s{n}") for n in range(3)], flow_step.s(tag="cb")).enqueue()
    big = chord([flow_step.s(tag=f"b{n}") for n in range(1_000)], flow_step.s(tag="cb")).enqueue()
    last_member, callback = big.jobs[-2], big.jobs[-1]
    Job.objects.filter(pk=last_member.pk).cancel(by="ops")  # cancels the callback in turn
    admin_client.get(page_url(small))  # the session and the user, read once
    with CaptureQueriesContext(connection) as small_queries:
        admin_client.get(page_url(small))
    with CaptureQueriesContext(connection) as big_queries:
        response = admin_client.get(page_url(big))
    assert len(big_queries) == len(small_queries), [q["sql"][:120] for q in big_queries]
    html = response.content.decode()
    page = text(response)
    assert html.count('class="sq-node') == MAX_NODES_PER_LAYER + 1  # the group's, the callback
    assert "Layer 0 1000 jobs Queued 999 Cancelled 1" in page
    # The cancelled member is drawn first, though it has the highest id of its layer.
    assert page.index(f"#{last_member.pk} tests.flow_step Cancelled") < page.index(
        f"#{big.jobs[0].pk} tests.flow_step Queued")
    assert "cancelled by ops" in page
    assert (f"#{callback.pk} tests.flow_step Cancelled attempts 0 of 5 after 1000 jobs "
            f"parent #{last_member.pk} ended cancelled") in page


def test_cancel_workflow_asks_first_then_cancels_every_unfinished_job(client, operator):
    flow = chord([flow_step.s(tag=f"m{n}") for n in range(3)], flow_step.s(tag="cb")).enqueue()
    done, running = Job.objects.claim(None, "w", limit=2)
    run_job(done)
    client.force_login(operator)
    assert "Cancel workflow" in text(client.get(page_url(flow)))
    confirm_page = client.post(act_url(flow, "cancel"))
    assert 'value="Yes, cancel workflow"' in confirm_page.content.decode()
    confirm = text(confirm_page)
    assert "Cancel the 3 unfinished jobs of this workflow?" in confirm
    assert "1 waiting for its parents, 1 queued, 1 running" in confirm
    assert "1 running job is asked to stop" in confirm
    assert statuses(flow) == ["succeeded", "running", "queued", "waiting"]  # not yet

    response = client.post(act_url(flow, "cancel"), {"post": "yes"}, follow=True)
    assert response.redirect_chain == [(page_url(flow), 302)]
    assert statuses(flow) == ["succeeded", "running", "cancelled", "cancelled"]
    asked = Job.objects.get(pk=running.pk)
    assert asked.cancel_requested_at is not None and asked.cancelled_by == "operator"
    assert Job.objects.get(pk=flow.jobs[3].pk).cancelled_by == "operator"
    messages = [str(m) for m in response.context["messages"]]
    assert messages == ["3 jobs cancelled or, if running, asked to stop (they show “cancelling” "
                        "until their worker stops them, within a heartbeat, plus the grace "
                        "period if they do not stop by themselves)."]


def test_retry_failed_jobs_resumes_the_jobs_their_end_cancelled(client, operator, caplog):
    flow = failing_chain()
    assert statuses(flow) == ["exhausted", "cancelled", "cancelled"]
    a = flow.jobs[0]
    Job.objects.filter(pk=a.pk).update(payload={"args": [], "kwargs": {"tag": "a"}})  # fixed
    client.force_login(operator)
    page = text(client.get(page_url(flow)))
    assert "Retry failed jobs" in page and "Cancel workflow" not in page  # nothing unfinished
    assert "Retry the 1 failed job of this workflow now?" in text(
        client.post(act_url(flow, "retry")))
    with caplog.at_level("INFO", logger="django_sqlqueue.admin"):
        client.post(act_url(flow, "retry"), {"post": "yes"})
    assert statuses(flow) == ["queued", "waiting", "waiting"]  # as retry_now() does
    assert f"admin action=retry_workflow user=operator workflow={flow.id} changed=1" in (
        caplog.text)
    drain()
    assert statuses(flow) == ["succeeded", "succeeded", "succeeded"]


def test_the_actions_need_their_permissions(client, staff_user, operator):
    flow = failing_chain()
    client.force_login(staff_user)  # may view jobs, nothing else
    page = text(client.get(page_url(flow)))
    assert "Exhausted" in page and "Retry failed jobs" not in page
    assert client.post(act_url(flow, "retry"), {"post": "yes"}).status_code == 403
    assert client.post(act_url(flow, "cancel"), {"post": "yes"}).status_code == 403
    assert statuses(flow) == ["exhausted", "cancelled", "cancelled"]
    client.force_login(make_staff("nobody"))  # staff, without the permission to view jobs
    assert client.get(page_url(flow)).status_code == 403
    client.force_login(operator)
    assert client.get(act_url(flow, "retry")).status_code == 405  # POST only
    assert client.post(act_url(flow, "other")).status_code == 404
    assert client.get(reverse("admin:django_sqlqueue_job_workflow",
                              args=["00000000-0000-0000-0000-000000000001"])).status_code == 404


def test_the_actions_need_the_csrf_token(operator):
    flow = failing_chain()
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(act_url(flow, "retry"), {"post": "yes"}).status_code == 403
    assert statuses(flow) == ["exhausted", "cancelled", "cancelled"]


def test_a_job_of_a_workflow_and_the_filtered_list_link_to_its_page(admin_client):
    flow = chain(flow_step.s(tag="a"), flow_step.s(tag="b")).enqueue()
    job_page = admin_client.get(reverse("admin:django_sqlqueue_job_change",
                                        args=[flow.jobs[1].pk])).content.decode()
    assert f'<a href="{page_url(flow)}">workflow {flow.id}</a>' in job_page
    listed = admin_client.get(reverse("admin:django_sqlqueue_job_changelist"),
                              {"workflow": str(flow.id)}).content.decode()
    assert f'<a href="{page_url(flow)}">Workflow graph</a>' in listed


def test_the_demo_workflow_of_the_screenshot(admin_client):
    workflow = seed_workflow()
    page = text(admin_client.get(reverse("admin:django_sqlqueue_job_workflow",
                                         args=[workflow])))
    assert "124 jobs, 25 unfinished" in page
    assert "Layer 1 120 jobs Queued 9 Running 12 Succeeded 96 Failed, will retry 2 Exhausted 1" \
        in page
    assert "waiting for 23 of 120 parents (9 queued, 12 running, 2 failed)" in page
    assert "waiting for 1 of 1 parents (1 waiting)" in page
    assert "ended exhausted" in page
