"""Enqueue joins the caller's transaction; enqueue_on_commit waits for another alias's commit."""

import pytest
from django.db import connections, transaction

from django_sqlqueue import enqueue_on_commit
from django_sqlqueue.models import Job
from tests.testapp.models import ExternalOrder, Order
from tests.testapp.tasks import add, send_email


class Boom(Exception):
    pass


@pytest.mark.django_db(transaction=True)
def test_rollback_leaves_no_job():
    with pytest.raises(Boom), transaction.atomic():
        order = Order.objects.create(total=10)
        send_email.enqueue(f"customer-{order.pk}@example.com")
        raise Boom
    assert not Order.objects.exists()
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_commit_keeps_job_and_data_together():
    with transaction.atomic():
        order = Order.objects.create(total=10)
        job = add.enqueue(order.pk, 1)
    assert Job.objects.get(pk=job.pk).payload == {"args": [order.pk, 1], "kwargs": {}}


@pytest.mark.django_db(transaction=True)
def test_workers_cannot_see_or_claim_a_job_before_commit():
    # A second connection to the same database plays the worker.
    worker_connection = connections.create_connection("default")
    try:
        with transaction.atomic():
            job = add.enqueue(1, 2)
            with worker_connection.cursor() as cursor:
                cursor.execute("SELECT COUNT(*) FROM django_sqlqueue_job WHERE id = %s", [job.pk])
                assert cursor.fetchone()[0] == 0
        with worker_connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM django_sqlqueue_job WHERE id = %s", [job.pk])
            assert cursor.fetchone()[0] == 1
    finally:
        worker_connection.close()
    assert [j.pk for j in Job.objects.claim(None, "w")] == [job.pk]


@pytest.mark.django_db(transaction=True)
def test_nested_savepoint_rollback_drops_only_its_job():
    with transaction.atomic():
        kept = add.enqueue(1, 1)
        with pytest.raises(Boom), transaction.atomic():
            add.enqueue(2, 2)
            raise Boom
    assert list(Job.objects.values_list("pk", flat=True)) == [kept.pk]


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
def test_enqueue_on_commit_waits_for_the_other_databases_commit():
    with transaction.atomic(using="other"):
        order = ExternalOrder.objects.create(total=5)
        job = enqueue_on_commit(add, [order.pk, 1], using="other")
        assert job.pk is None
        assert not Job.objects.exists()  # nothing until "other" commits
    assert job.pk is not None
    assert Job.objects.get().payload["args"] == [order.pk, 1]


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
def test_enqueue_on_commit_rollback_enqueues_nothing():
    with pytest.raises(Boom), transaction.atomic(using="other"):
        ExternalOrder.objects.create(total=5)
        enqueue_on_commit(add, [1, 2], using="other")
        raise Boom
    assert not ExternalOrder.objects.exists()
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
def test_enqueue_on_commit_validates_at_the_call_site():
    with pytest.raises(Exception, match="priority 500"), transaction.atomic(using="other"):
        enqueue_on_commit(add, [1, 2], using="other", priority=500)
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_filtered_claim_works_outside_a_transaction():
    """docs/api.md's ``Job.objects.filter(...).claim()``, in autocommit as a script runs it: on
    PostgreSQL and MariaDB Django compiles its FOR UPDATE only inside a transaction."""
    wanted = add.enqueue(1, 2)
    send_email.enqueue("a@example.com")
    assert transaction.get_autocommit()
    [claimed] = Job.objects.filter(task_name=add.name).claim(None, "script", limit=5)
    assert claimed.pk == wanted.pk and claimed.status == "running"
    assert Job.objects.get(pk=wanted.pk).claimed_by == "script"  # committed
