"""The job list: columns, filters, search, date hierarchy, and what it costs."""

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.models import Job
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db
LIST = reverse("admin:django_sqlqueue_job_changelist")


def listed(response):
    return sorted(job.pk for job in response.context["cl"].result_list)


def error(message, attempt=1, kind="builtins.RuntimeError", traceback="Traceback (most recent"):
    return {"attempt": attempt, "at": "2026-01-02T03:04:05+00:00", "type": kind,
            "message": message, "traceback": traceback, "worker": "web-1:42:abc"}


def test_columns_show_badge_attempts_age_duration_worker_and_last_error(admin_client):
    started = timezone.now() - dt.timedelta(minutes=3)
    JobFactory(
        exhausted=True, queue="emails", task_name="shop.tasks.send_receipt", attempts=3,
        max_attempts=3, claimed_at=started, finished_at=started + dt.timedelta(seconds=2.5),
        claimed_by="web-1:42:abc",
        errors=[error("first"), error("SMTP said <no>", attempt=3, kind="smtplib.SMTPError")],
    )
    html = admin_client.get(LIST).content.decode()
    assert 'class="sq-badge" style="background:#d1344b">Exhausted</span>' in html
    assert "shop.tasks.send_receipt" in html and ">emails<" in html
    assert "3 of 3" in html
    assert "2.5 s" in html  # duration of the attempt
    # the worker, as host:pid, links to its row on the workers page
    assert '?name=web-1%3A42%3Aabc" title="web-1:42:abc">web-1:42</a>' in html
    assert "SMTPError: SMTP said &lt;no&gt;" in html  # newest error, escaped


def test_list_reads_neither_payload_nor_result(admin_client):
    job = JobFactory(failed=True)
    with CaptureQueriesContext(connection) as queries:
        response = admin_client.get(LIST)
    assert listed(response) == [job.pk]

    def column(name):  # as this database quotes it: "job"."status", `job`.`status`
        quote = connection.ops.quote_name
        return f"{quote(Job._meta.db_table)}.{quote(name)}"

    statements = [query["sql"] for query in queries]
    # The query that read the listed rows was captured...
    assert any(column("status") in sql and column("task_name") in sql for sql in statements)
    # ...and no query read either column.
    assert [sql for sql in statements if column("payload") in sql or column("result") in sql] \
        == []


def test_no_add_button_and_no_add_view(admin_client):
    html = admin_client.get(LIST).content.decode()
    assert reverse("admin:django_sqlqueue_job_add") not in html
    assert admin_client.get(reverse("admin:django_sqlqueue_job_add")).status_code == 403


def test_filter_by_status_queue_task_and_errors(admin_client):
    failed = JobFactory(failed=True, queue="emails")
    queued = JobFactory(queue="emails", task_name="shop.tasks.other")
    done = JobFactory(succeeded=True)
    assert listed(admin_client.get(LIST, {"status__exact": "failed"})) == [failed.pk]
    assert listed(admin_client.get(LIST, {"queue": "emails"})) == [failed.pk, queued.pk]
    assert listed(admin_client.get(LIST, {"task_name": "shop.tasks.other"})) == [queued.pk]
    assert listed(admin_client.get(LIST, {"has_errors": "yes"})) == [failed.pk]
    assert listed(admin_client.get(LIST, {"has_errors": "no"})) == [queued.pk, done.pk]


def test_running_jobs_of_one_worker(admin_client):
    """The workers page links each worker's running jobs this way."""
    mine = JobFactory(running=True, claimed_by="web-1:42:abc")
    JobFactory(running=True, claimed_by="web-2:43:def")
    JobFactory(succeeded=True, claimed_by="web-1:42:abc")
    params = {"status__exact": "running", "claimed_by": "web-1:42:abc"}
    assert listed(admin_client.get(LIST, params)) == [mine.pk]


def test_queue_and_task_choices_come_from_recent_jobs_plus_the_selected_value(admin_client):
    JobFactory(queue="emails")
    html = admin_client.get(LIST, {"queue": "gone-queue"}).content.decode()
    assert "?queue=emails" in html
    assert "gone-queue" in html  # selected, though no recent job has it
    assert "tests.testapp.tasks.add" in html


@pytest.mark.parametrize("term", ["{pk}", "#{pk}"])
def test_search_by_id(admin_client, term):
    job, _other = JobFactory(), JobFactory()
    assert listed(admin_client.get(LIST, {"q": term.format(pk=job.pk)})) == [job.pk]


def test_search_by_task_unique_key_and_error_text(admin_client):
    by_task = JobFactory(task_name="shop.tasks.charge_card")
    by_key = JobFactory(unique_key="receipt:1042")
    by_error = JobFactory(failed=True, errors=[error("Connection refused by mail.example.com")])
    JobFactory()
    assert listed(admin_client.get(LIST, {"q": "charge_CARD"})) == [by_task.pk]
    assert listed(admin_client.get(LIST, {"q": "receipt:10"})) == [by_key.pk]
    assert listed(admin_client.get(LIST, {"q": "connection refused"})) == [by_error.pk]


def test_date_hierarchy_drills_down_without_scanning(admin_client):
    old = JobFactory(enqueued_at=dt.datetime(2025, 3, 14, 12, tzinfo=dt.UTC))
    new = JobFactory(enqueued_at=dt.datetime(2026, 1, 2, 8, tzinfo=dt.UTC))
    html = admin_client.get(LIST).content.decode()
    assert "enqueued_at__year=2025" in html and "enqueued_at__year=2026" in html
    response = admin_client.get(LIST, {"enqueued_at__year": "2025"})
    assert listed(response) == [old.pk]
    assert "enqueued_at__month=3" in response.content.decode()
    response = admin_client.get(
        LIST, {"enqueued_at__year": "2026", "enqueued_at__month": "1", "enqueued_at__day": "2"}
    )
    assert listed(response) == [new.pk]
    with CaptureQueriesContext(connection) as queries:
        admin_client.get(LIST)
    assert not any("DISTINCT" in q["sql"] or "MIN(" in q["sql"] for q in queries)


def test_date_hierarchy_of_a_single_month_offers_its_days(admin_client):
    JobFactory(enqueued_at=dt.datetime(2026, 1, 2, tzinfo=dt.UTC))
    JobFactory(enqueued_at=dt.datetime(2026, 1, 4, tzinfo=dt.UTC))
    html = admin_client.get(LIST).content.decode()
    for day in (2, 3, 4):
        assert f"enqueued_at__day={day}" in html
    assert "enqueued_at__day=5" not in html


def test_bad_dates_in_the_url_do_not_break_the_page(admin_client):
    response = admin_client.get(LIST, {"enqueued_at__year": "2026", "enqueued_at__month": "13"})
    assert response.status_code in (200, 302)


@pytest.mark.parametrize("vendor_queries", [{"sqlite": 7, "postgresql": 8, "mysql": 7}])
def test_query_count_does_not_grow_with_the_jobs_listed(admin_client, vendor_queries):
    """Session, user, recent queue/task values, count (PostgreSQL: estimate, then ids), the
    page, and the first and last enqueued_at: the same for 3 jobs as for 30 (no N+1).

    On PostgreSQL the exact count is skipped when the table's row estimate is already large
    (left by earlier tests that committed jobs), one query fewer: so the count is at most the
    expected one, and the same for both pages."""
    most = vendor_queries[connection.vendor]
    JobFactory.create_batch(2, failed=True, claimed_by="w1", errors=[error("boom")])
    JobFactory(running=True)
    with CaptureQueriesContext(connection) as few:
        assert len(admin_client.get(LIST).context["cl"].result_list) == 3
    for traits in ({"failed": True}, {"running": True}, {"succeeded": True}):
        JobFactory.create_batch(9, claimed_by="w1", **traits)
    with CaptureQueriesContext(connection) as many:
        assert len(admin_client.get(LIST).context["cl"].result_list) == 30
    assert len(few) <= most
    assert len(many) == len(few), [q["sql"] for q in many.captured_queries]


def test_staff_without_view_permission_is_refused(client, django_user_model):
    user = django_user_model.objects.create_user("nobody", password="pw", is_staff=True)
    client.force_login(user)
    assert client.get(LIST).status_code == 403


def test_anonymous_users_go_to_the_login_page(client):
    response = client.get(LIST)
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_viewer_sees_no_actions(client, staff_user):
    JobFactory(failed=True)
    client.force_login(staff_user)
    response = client.get(LIST)
    assert response.status_code == 200
    assert "action_checkbox" not in response.content.decode()
    assert Job.objects.count() == 1
