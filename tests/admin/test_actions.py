"""The list's actions: each changes jobs only through the queryset API, each needs its own
permission, and each says how many jobs changed, how many were skipped, and why."""

import datetime as dt

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.models.job_queryset import JobQuerySet
from django_sqlqueue.workflows import chain
from tests.admin.users import make_staff
from tests.factories import JobFactory
from tests.testapp.tasks import flow_step

pytestmark = pytest.mark.django_db
LIST = reverse("admin:django_sqlqueue_job_changelist")


def act(client, action, jobs=(), *, url=LIST, **extra):
    data = {"action": action, "_selected_action": [job.pk for job in jobs], **extra}
    return client.post(url, data, follow=True)


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def statuses(*jobs):
    return [Job.objects.get(pk=job.pk).status for job in jobs]


@pytest.fixture
def one_of_each():
    return {
        "queued": JobFactory(),
        "running": JobFactory(running=True),
        "succeeded": JobFactory(succeeded=True),
        "failed": JobFactory(failed=True),
        "exhausted": JobFactory(exhausted=True, errors=[{"message": "boom"}]),
        "cancelled": JobFactory(cancelled=True),
        "expired": JobFactory(expired=True),
    }


@pytest.fixture
def as_operator(client, operator):
    client.force_login(operator)
    return client


def test_retry_now_queues_retryable_jobs_and_explains_the_rest(as_operator, one_of_each):
    response = act(as_operator, "retry_now", one_of_each.values())
    assert messages_of(response) == [
        "4 jobs queued again, due now.",
        "3 jobs skipped: 1 queued, 1 running, 1 succeeded (retry now applies to failed, "
        "exhausted, cancelled and expired jobs).",
    ]
    jobs = {name: Job.objects.get(pk=job.pk) for name, job in one_of_each.items()}
    for name in ("failed", "exhausted", "cancelled", "expired"):
        assert jobs[name].status == "queued" and jobs[name].finished_at is None
    assert [jobs[n].status for n in ("queued", "running", "succeeded")] == [
        "queued", "running", "succeeded"]
    exhausted = jobs["exhausted"]
    assert exhausted.errors == [{"message": "boom"}]  # history kept
    assert exhausted.max_attempts == exhausted.attempts + 1  # one more attempt, none reset


def test_retry_now_skips_a_job_whose_unique_key_is_taken(as_operator):
    old = JobFactory(exhausted=True, unique_key="receipt:7")
    JobFactory(unique_key="receipt:7")  # a newer job holds the key
    response = act(as_operator, "retry_now", [old])
    assert messages_of(response) == [
        "1 job skipped: 1 because their unique key is held by another unfinished job, or they "
        "changed meanwhile."
    ]
    assert statuses(old) == ["exhausted"]


def test_retry_now_of_two_jobs_with_the_same_unique_key_queues_only_the_newest(as_operator):
    """Only one unfinished job may hold a unique key: retry_now() queues the newest of them."""
    older, newer = [JobFactory(exhausted=True, unique_key="receipt:9") for _ in range(2)]
    other = JobFactory(exhausted=True)
    response = act(as_operator, "retry_now", [older, newer, other])
    assert response.status_code == 200
    assert messages_of(response)[0] == "2 jobs queued again, due now."
    assert statuses(older, newer, other) == ["exhausted", "queued", "queued"]


def test_run_now_makes_waiting_jobs_due(as_operator):
    scheduled = JobFactory(scheduled=True)
    due = JobFactory()
    done = JobFactory(succeeded=True)
    before = timezone.now()
    response = act(as_operator, "run_now", [scheduled, due, done])
    assert messages_of(response) == [
        "1 job made due now.",
        "2 jobs skipped: 1 succeeded (run now applies to queued jobs and failed jobs waiting "
        "for their retry); 1 because they were already due.",
    ]
    run_at = Job.objects.get(pk=scheduled.pk).run_at
    assert before <= run_at <= timezone.now()


def test_cancel_stops_jobs_that_have_not_started_and_asks_running_ones_to_stop(
        as_operator, operator):
    queued, failed, running = JobFactory(), JobFactory(failed=True), JobFactory(running=True)
    done = JobFactory(succeeded=True)
    response = act(as_operator, "cancel", [queued, failed, running, done])
    assert messages_of(response) == [
        "3 jobs cancelled or, if running, asked to stop (they show “cancelling” until their "
        "worker stops them, within a heartbeat, plus the grace period if they do not stop by "
        "themselves).",
        "1 job skipped: 1 succeeded (only jobs that have not finished can be cancelled).",
    ]
    assert statuses(queued, failed, running, done) == [
        "cancelled", "cancelled", "running", "succeeded"]
    # Who asked is recorded; the running job is asked, not yet cancelled.
    assert {Job.objects.get(pk=j.pk).cancelled_by for j in (queued, failed, running)} == {
        operator.get_username()}
    assert list(Job.objects.cancelling()) == [Job.objects.get(pk=running.pk)]
    again = act(as_operator, "cancel", [running])
    assert messages_of(again) == [
        "1 job skipped: 1 because they finished meanwhile, or were running and already asked "
        "to stop."]


def test_the_admin_shows_cancelling_and_cancelled_while_running_jobs_and_who_asked(
        as_operator, operator):
    running = JobFactory(running=True)
    act(as_operator, "cancel", [running])
    page = as_operator.get(f"{LIST}?cancel=cancelling").content.decode()
    assert f">{running.pk}<" in page and "cancelling" in page
    detail = as_operator.get(reverse("admin:django_sqlqueue_job_change", args=[running.pk]))
    assert f"asked by {operator.get_username()}" in detail.content.decode()
    assert "waiting for its worker to stop it" in detail.content.decode()
    dashboard = as_operator.get(reverse("admin:django_sqlqueue_job_dashboard")).content.decode()
    assert "1 running job</a> asked to cancel" in dashboard
    job = Job.objects.get(pk=running.pk)
    assert job.fail(RuntimeError("stopped"))  # what its worker writes once it stopped it
    page = as_operator.get(f"{LIST}?cancel=while_running").content.decode()
    assert f">{running.pk}<" in page
    detail = as_operator.get(reverse("admin:django_sqlqueue_job_change", args=[running.pk]))
    assert "stopped at" in detail.content.decode()
    assert "1 running job" not in as_operator.get(
        reverse("admin:django_sqlqueue_job_dashboard")).content.decode()


def test_actions_apply_to_every_job_of_a_filtered_list(as_operator):
    failed = JobFactory.create_batch(3, failed=True)
    other = JobFactory(exhausted=True)
    response = act(as_operator, "cancel", failed[:1], url=f"{LIST}?status__exact=failed",
                   select_across="1")
    assert messages_of(response) == ["3 jobs cancelled."]
    assert statuses(*failed, other) == ["cancelled"] * 3 + ["exhausted"]


@pytest.mark.parametrize("action, method", [
    ("retry_now", "retry_now"), ("run_now", "run_now"), ("cancel", "cancel"),
])
def test_actions_call_the_queryset_api(as_operator, monkeypatch, action, method):
    calls = []
    original = getattr(JobQuerySet, method)

    def spy(queryset, *args, **kwargs):
        calls.append(sorted(queryset.values_list("pk", flat=True)))
        return original(queryset, *args, **kwargs)

    monkeypatch.setattr(JobQuerySet, method, spy)
    job = JobFactory(failed=True)
    act(as_operator, action, [job])
    assert calls == [[job.pk]]


@pytest.mark.parametrize("action, permission", [
    ("retry_now", "retry_job"), ("run_now", "run_job_now"), ("cancel", "cancel_job"),
    ("delete_selected", "delete_job"),
])
def test_each_action_needs_its_own_permission(client, action, permission):
    everything_else = {"retry_job", "run_job_now", "cancel_job", "delete_job"} - {permission}
    client.force_login(make_staff("almost", "view_job", *everything_else))
    jobs = [JobFactory(failed=True, scheduled=True), JobFactory(exhausted=True)]
    html = client.get(LIST).content.decode()
    assert f'value="{action}"' not in html  # not offered
    response = act(client, action, jobs, post="yes")
    assert messages_of(response) == ["No action selected."]  # refused
    assert statuses(*jobs) == ["failed", "exhausted"]  # nothing changed
    assert Job.objects.get(pk=jobs[0].pk).run_at > timezone.now()


def test_a_viewer_can_change_nothing(client, staff_user):
    job = JobFactory(failed=True)
    client.force_login(staff_user)
    for action in ("retry_now", "run_now", "cancel", "delete_selected"):
        act(client, action, [job], post="yes")
    assert statuses(job) == ["failed"]


def test_nothing_selected(as_operator):
    JobFactory()
    response = act(as_operator, "retry_now", [], index="0")
    assert "Items must be selected" in messages_of(response)[0]


def test_delete_asks_first_with_counts_by_status(as_operator):
    jobs = [JobFactory(succeeded=True), JobFactory(succeeded=True), JobFactory(running=True)]
    response = act(as_operator, "delete_selected", jobs)
    html = response.content.decode()
    assert "Delete 3 jobs?" in html
    assert "<li>Succeeded: 2</li>" in html and "<li>Running: 1</li>" in html
    assert "1 of them is running" in html
    assert 'value="Yes, delete 3 jobs"' in html
    for job in jobs:  # the selection, posted back with the confirmation
        assert f'name="_selected_action" value="{job.pk}"' in html
    assert Job.objects.count() == 3


def test_delete_deletes_in_batches_and_logs_each_job(as_operator, monkeypatch):
    monkeypatch.setattr("django_sqlqueue.admin.actions.DELETE_BATCH", 2)
    jobs = JobFactory.create_batch(5, succeeded=True)
    keep = JobFactory()
    response = act(as_operator, "delete_selected", jobs, post="yes")
    assert messages_of(response) == ["5 jobs deleted."]
    assert list(Job.objects.values_list("pk", flat=True)) == [keep.pk]
    logged = LogEntry.objects.filter(action_flag=DELETION)
    assert sorted(int(pk) for pk in logged.values_list("object_id", flat=True)) == sorted(
        job.pk for job in jobs)


def test_delete_all_of_a_filtered_list(as_operator):
    old = timezone.now() - dt.timedelta(days=40)
    JobFactory.create_batch(3, exhausted=True, enqueued_at=old)
    keep = JobFactory(succeeded=True)
    first = Job.objects.filter(status="exhausted").first()
    url = f"{LIST}?status__exact=exhausted"
    confirm = act(as_operator, "delete_selected", [first], url=url, select_across="1")
    assert "Delete 3 jobs?" in confirm.content.decode()
    assert 'name="select_across" value="1"' in confirm.content.decode()
    act(as_operator, "delete_selected", [first], url=url, select_across="1", post="yes")
    assert list(Job.objects.values_list("pk", flat=True)) == [keep.pk]


def test_deleting_an_unfinished_workflow_job_cancels_the_jobs_waiting_for_it(as_operator):
    flow = chain(flow_step.s(tag="a"), flow_step.s(tag="b")).enqueue()
    act(as_operator, "delete_selected", [flow.jobs[0]], post="yes")
    child = Job.objects.get(pk=flow.jobs[1].pk)
    assert child.status == "cancelled"
    assert child.cancelled_by == (f"workflow: parent job {flow.jobs[0].pk} was deleted before "
                                  "it finished")
    # And from the job's own page (its delete view calls Job.delete()).
    flow = chain(flow_step.s(tag="c"), flow_step.s(tag="d")).enqueue()
    delete_url = reverse("admin:django_sqlqueue_job_delete", args=[flow.jobs[0].pk])
    assert as_operator.post(delete_url, {"post": "yes"}).status_code == 302
    assert Job.objects.get(pk=flow.jobs[1].pk).status == "cancelled"
