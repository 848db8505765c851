"""Unique keys over chosen statuses and a period (``unique_states``, ``unique_period``): the
database's unique index on the held slot decides, and a conflicting enqueue gets the holder.
The race of many processes is tests/process/test_unique_race.py."""

import datetime as dt

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from django_sqlqueue.db.job_table import UNIQUE_STATE_BITS
from django_sqlqueue.enqueue.building import unique_slot
from django_sqlqueue.exceptions import InvalidUniqueKey
from django_sqlqueue.models import Job
from django_sqlqueue.registry import Task
from django_sqlqueue.statuses import JobStatus
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db

UNFINISHED_AND_SUCCEEDED = ["queued", "running", "failed", "succeeded"]
LONG = 10**9  # seconds: a period whose boundary no test run crosses (2001-09-09, 2033-05-18)


def finish(job, status):
    """Claim ``job`` (the only ready one) and end it with ``status``."""
    (claimed,) = Job.objects.claim(worker_id="test")
    assert claimed.pk == job.pk
    if status == JobStatus.SUCCEEDED:
        assert claimed.complete("done")
    else:
        assert claimed.fail(RuntimeError("no"), retry=False)
    claimed.refresh_from_db()
    assert claimed.status == status
    return claimed


def test_without_states_or_period_a_unique_key_is_as_before():
    job = add.using(unique_key="k", unique_states=["running", "failed", "queued"]).enqueue(1, 2)
    assert (job.unique_key, job.unique_slot, job.unique_states) == ("k", None, None)


def test_a_key_held_by_a_succeeded_job_returns_it_and_a_failed_one_frees_it():
    unique = add.using(unique_key="sync", unique_states=UNFINISHED_AND_SUCCEEDED)
    first = unique.enqueue(1, 2)
    assert (first.unique_key, first.unique_slot) == (None, "sync")
    assert unique.enqueue(3, 4).pk == first.pk  # queued
    finish(first, JobStatus.SUCCEEDED)
    assert unique.enqueue(3, 4).pk == first.pk  # succeeded: still holds the key
    Job.objects.filter(pk=first.pk).update(status=JobStatus.EXHAUSTED)  # not among the states
    second = unique.enqueue(5, 6)
    assert second.pk != first.pk and second.args == [5, 6]
    finish(second, JobStatus.EXHAUSTED)  # the outcome write itself lets go of the slot
    third = unique.enqueue(7, 8)
    assert third.pk not in (first.pk, second.pk)
    assert Job.objects.filter(unique_slot="sync").count() == 3


def test_a_period_holds_the_key_for_that_period_finished_jobs_included():
    unique = add.using(unique_key="sync", unique_period=dt.timedelta(seconds=LONG),
                       unique_states=[*UNFINISHED_AND_SUCCEEDED, "exhausted", "cancelled",
                                      "expired"])
    first = unique.enqueue(1, 2)
    assert first.unique_slot == unique_slot("sync", LONG, first.enqueued_at)
    assert first.unique_slot.startswith("sync@20")
    finish(first, JobStatus.EXHAUSTED)
    assert unique.enqueue(3, 4).pk == first.pk
    # The next period: as if the first one had been enqueued a period ago.
    earlier = unique_slot("sync", LONG, first.enqueued_at - dt.timedelta(seconds=LONG))
    Job.objects.filter(pk=first.pk).update(unique_slot=earlier)
    second = unique.enqueue(3, 4)
    assert second.pk != first.pk and second.unique_slot == first.unique_slot


def test_a_period_alone_counts_unfinished_jobs_only():
    unique = add.using(unique_key="sync", unique_period=LONG)
    first = unique.enqueue(1, 2)
    assert first.unique_states == UNIQUE_STATE_BITS["queued"] | UNIQUE_STATE_BITS[
        "running"] | UNIQUE_STATE_BITS["failed"]
    finish(first, JobStatus.SUCCEEDED)
    assert unique.enqueue(1, 2).pk != first.pk


def test_periods_are_aligned_to_the_epoch_in_utc():
    at = dt.datetime(2026, 11, 26, 2, 7, 31, tzinfo=dt.timezone.utc)
    assert unique_slot("k", 300, at) == "k@2026-11-26T02:05:00+00:00"
    assert unique_slot("k", 300, at + dt.timedelta(minutes=3)) == "k@2026-11-26T02:10:00+00:00"
    assert unique_slot("k", None, at) == "k"


def test_the_database_refuses_a_second_holder_not_only_enqueue():
    held = add.using(unique_key="k", unique_states=UNFINISHED_AND_SUCCEEDED).enqueue(1, 2)
    copy = {"task_name": held.task_name, "payload": {}, "unique_slot": "k",
            "unique_states": held.unique_states}
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.create(**copy)
    # A job that does not hold its slot (its status is not among its states) is no conflict.
    Job.objects.create(**copy, status=JobStatus.CANCELLED)
    Job.objects.filter(pk=held.pk).update(status=JobStatus.CANCELLED)
    Job.objects.create(**copy)  # the key is free again


def test_retry_now_skips_a_job_whose_slot_another_holds():
    unique = add.using(unique_key="k", unique_states=UNFINISHED_AND_SUCCEEDED)
    first = unique.enqueue(1, 2)
    finish(first, JobStatus.EXHAUSTED)
    second = unique.enqueue(3, 4)
    assert Job.objects.filter(pk=first.pk).retry_now() == 0
    Job.objects.filter(pk=second.pk).update(status=JobStatus.CANCELLED)
    # Both retryable now: only the newest of one slot gets it back.
    assert Job.objects.filter(pk__in=[first.pk, second.pk]).retry_now() == 1
    assert Job.objects.get(pk=second.pk).status == JobStatus.QUEUED


def test_task_defaults_and_per_call_options():
    task = Task(add.func, "tests.unique_task", {"unique_period": LONG})
    job = task.using(unique_key="a").enqueue(1, 2)
    assert job.unique_slot.startswith("a@")
    plain = task.using(unique_key="b", unique_period=None).enqueue(1, 2)
    assert (plain.unique_key, plain.unique_slot) == ("b", None)
    assert task.enqueue(1, 2).unique_slot is None  # a task's period without a key is no key
    with pytest.raises(InvalidUniqueKey, match="pass unique_key too"):
        Job.objects.enqueue(add, (1, 2), unique_period=60)  # an enqueue's is a mistake


def test_bulk_enqueue_refuses_slots():
    with pytest.raises(ValueError, match="one at a time"):
        Job.objects.bulk_enqueue([add.using(unique_key="k", unique_period=60).prepare(1, 2)])


@pytest.mark.parametrize(("options", "message"), [
    ({"unique_states": "succeeded"}, "must be a list of statuses"),
    ({"unique_states": ["queued", "done"]}, "'done', which is not a job status"),
    ({"unique_states": ["succeeded"]}, "add queued, running, failed"),
    ({"unique_period": 0}, "more than zero"),
    ({"unique_period": 0.5}, "1 second or more"),
    ({"unique_period": "5m"}, "timedelta or a number of seconds"),
])
def test_bad_options_are_refused_at_enqueue(options, message):
    with pytest.raises(InvalidUniqueKey, match=message):
        add.using(unique_key="k", **options).enqueue(1, 2)
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_migration_goes_back_and_forth_and_the_database_still_decides():
    executor = MigrationExecutor(connection)
    leaf = executor.loader.graph.leaf_nodes("django_sqlqueue")
    name = next(name for app, name in executor.loader.disk_migrations
                if app == "django_sqlqueue" and name.endswith("_unique_slots_and_tags"))
    (parent,) = [dep for app, dep in executor.loader.get_migration("django_sqlqueue",
                                                                  name).dependencies]
    try:
        executor.migrate([("django_sqlqueue", parent)])
    finally:
        MigrationExecutor(connection).migrate(leaf)
    test_the_database_refuses_a_second_holder_not_only_enqueue()
