"""The queue's tables in a database of their own ("jobs", by JobsDatabaseRouter), the business
data in "default": enqueue goes to "jobs", enqueue_on_commit waits for "default"'s commit."""

import inspect
from pathlib import Path

import pytest
from django.core import checks
from django.db import router, transaction

from django_sqlqueue import enqueue_on_commit
from django_sqlqueue.models import Job, Worker
from tests.testapp.models import Order
from tests.testapp.routers import JobsDatabaseRouter
from tests.testapp.tasks import add, send_email

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "jobs"]),
    pytest.mark.usefixtures("jobs_database"),
]


class Boom(Exception):
    pass


def test_the_router_sends_every_table_of_the_queue_to_the_jobs_database():
    assert {router.db_for_write(model) for model in (Job, Worker)} == {"jobs"}
    assert router.db_for_write(Order) == "default"
    job = send_email.enqueue("a@example.com")
    assert job._state.db == "jobs"
    assert Job.objects.using("jobs").filter(pk=job.pk).exists()
    assert list(Job.objects.all()) == [job]  # reads follow the router too


def test_enqueue_on_commit_inserts_the_job_once_the_business_transaction_commits():
    with transaction.atomic():  # on "default", the business data's database
        order = Order.objects.create(total=10)
        job = enqueue_on_commit(add, [order.pk, 1])
        assert job.pk is None
        assert not Job.objects.exists()  # nothing in "jobs" until "default" commits
    assert Job.objects.using("jobs").get().payload["args"] == [order.pk, 1]
    assert job.pk is not None and job._state.db == "jobs"
    short_form = add.enqueue_on_commit(2, 3)  # autocommit: at once
    assert short_form.pk is not None


def test_a_rolled_back_business_transaction_enqueues_nothing():
    with pytest.raises(Boom), transaction.atomic():
        Order.objects.create(total=10)
        add.enqueue_on_commit(1, 2)
        raise Boom
    assert not Order.objects.exists()
    assert not Job.objects.exists()


def test_plain_enqueue_in_the_business_transaction_is_not_atomic_with_it():
    # What the docs warn about: the job commits on "jobs" on its own, whatever "default" does.
    with pytest.raises(Boom), transaction.atomic():
        Order.objects.create(total=10)
        add.enqueue(1, 2)
        raise Boom
    assert not Order.objects.exists()
    assert Job.objects.count() == 1


def test_the_system_check_looks_at_the_jobs_database():
    errors = checks.run_checks(databases=["jobs"], tags=["database"])
    assert [e.id for e in errors if e.id.startswith("sqlqueue")] == []


def test_the_docs_show_this_router():
    page = (Path(__file__).resolve().parents[2] / "docs" / "scaling.md").read_text()
    assert inspect.getsource(JobsDatabaseRouter) in page
