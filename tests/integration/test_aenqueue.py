"""The async twins of the enqueue entry points (``aenqueue``, ``abulk_enqueue``,
``aenqueue_many``, ``aenqueue_on_commit``): the same jobs and errors as their sync twins, and
inside the caller's atomic block they join its transaction (sync_to_async(thread_sensitive=True)
runs them on the thread of the caller's sync work, as in an async view under a sync middleware
or test)."""

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction

import django_sqlqueue
from django_sqlqueue.exceptions import InvalidPayload
from django_sqlqueue.models import Job
from tests.testapp.tasks import add, send_email

pytestmark = pytest.mark.django_db


class Rollback(Exception):
    pass


async def _awaited(coroutine):
    return await coroutine


def wait_for(coroutine):
    """Await ``coroutine`` from this sync test, as an async view awaits it under ASGI (manager
    methods, like Django's own ``aget``, are not marked as coroutine functions)."""
    return async_to_sync(_awaited)(coroutine)


def test_task_aenqueue_returns_the_job_as_enqueue_does():
    job = async_to_sync(send_email.using(priority=5).aenqueue)("a@example.com", subject="x")
    row = Job.objects.get(pk=job.pk)
    twin = send_email.using(priority=5).enqueue("a@example.com", subject="x")
    for field in ("task_name", "queue", "priority", "payload", "max_attempts", "status"):
        assert getattr(row, field) == getattr(job, field) == getattr(twin, field)


def test_job_objects_aenqueue_and_aenqueue_prepared():
    job = wait_for(Job.objects.aenqueue(add, (1, 2), priority=3))
    prepared = wait_for(Job.objects.aenqueue_prepared(add.prepare(3, 4)))
    assert Job.objects.get(pk=job.pk).payload == {"args": [1, 2], "kwargs": {}}
    assert Job.objects.get(pk=job.pk).priority == 3
    assert Job.objects.get(pk=prepared.pk).payload == {"args": [3, 4], "kwargs": {}}


def test_abulk_enqueue_inserts_every_job():
    jobs = wait_for(Job.objects.abulk_enqueue([add.prepare(n, n) for n in range(5)],
                                                   batch_size=2))
    assert Job.objects.filter(pk__in=[job.pk for job in jobs]).count() == 5


def test_aenqueue_many_inserts_a_job_per_call_and_returns_their_ids():
    ids = async_to_sync(add.aenqueue_many)([(1, 2), {"a": 3, "b": 4}])
    more = wait_for(Job.objects.aenqueue_many(add, [(5, 6)] * 3, priority=7, batch_size=2))
    rows = Job.objects.in_bulk(ids + more)
    assert [rows[pk].payload for pk in ids] == [{"args": [1, 2], "kwargs": {}},
                                               {"args": [], "kwargs": {"a": 3, "b": 4}}]
    assert [(rows[pk].args, rows[pk].priority) for pk in more] == [([5, 6], 7)] * 3


def test_the_async_twins_raise_what_the_sync_ones_raise():
    with pytest.raises(InvalidPayload):
        async_to_sync(add.aenqueue)(object(), 1)
    with pytest.raises(TypeError, match="unknown option"):
        wait_for(Job.objects.aenqueue(add, (1, 2), colour="red"))
    with pytest.raises(TypeError, match="unsaved jobs"):
        wait_for(Job.objects.abulk_enqueue([Job.objects.enqueue(add, (1, 2))]))
    with pytest.raises(ValueError, match="unique_key"):
        wait_for(Job.objects.abulk_enqueue([add.using(unique_key="k").prepare(1, 2)]))
    with pytest.raises(InvalidPayload, match=r"call 1"):
        async_to_sync(add.aenqueue_many)([(1, 2), 3])
    assert Job.objects.count() == 1  # only the sync enqueue above


def test_aenqueue_joins_the_callers_transaction():
    with pytest.raises(Rollback), transaction.atomic():
        async_to_sync(add.aenqueue)(1, 2)
        wait_for(Job.objects.abulk_enqueue([add.prepare(3, 4)]))
        async_to_sync(add.aenqueue_many)([(5, 6), (7, 8)])
        assert Job.objects.count() == 4  # seen inside the transaction
        raise Rollback
    assert Job.objects.count() == 0  # rolled back with it
    with transaction.atomic():
        kept = async_to_sync(add.aenqueue)(5, 6)
    assert Job.objects.filter(pk=kept.pk).exists()


def test_aenqueue_on_commit_waits_for_the_commit(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with transaction.atomic():
            job = async_to_sync(add.aenqueue_on_commit)(1, 2)
            other = async_to_sync(django_sqlqueue.aenqueue_on_commit)(add, [3, 4], priority=7)
            assert job.pk is None and other.pk is None and Job.objects.count() == 0
    assert len(callbacks) >= 2  # the two enqueues (and the wake-up of local workers)
    assert Job.objects.get(pk=other.pk).priority == 7
    assert Job.objects.filter(pk=job.pk).exists()


def test_aenqueue_on_commit_is_dropped_on_rollback(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(Rollback), transaction.atomic():
            async_to_sync(add.aenqueue_on_commit)(1, 2)
            raise Rollback
    assert callbacks == [] and Job.objects.count() == 0
