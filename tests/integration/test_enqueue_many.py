"""``task.enqueue_many(calls)`` and ``Job.objects.enqueue_many(task, calls)``: one job per
call, each the row that ``enqueue`` would have stored, ids returned in the calls' order, every
call checked before anything is inserted, batches all or nothing, and on every database (SQLite
takes bulk_enqueue's way)."""

import datetime as dt
import threading

import pytest
from django.db import connection, transaction
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext

from django_sqlqueue import signals
from django_sqlqueue.enqueue import notify
from django_sqlqueue.exceptions import InvalidArguments, InvalidPayload, InvalidUniqueKey
from django_sqlqueue.models import Job
from tests.testapp.tasks import add, send_email, takes_anything

pytestmark = pytest.mark.django_db

#: What differs between two jobs enqueued a moment apart, whatever the way.
TIMES_AND_ID = {"id", "enqueued_at", "run_at", "expires_at"}


def stored(pk) -> dict:
    row = Job.objects.get(pk=pk)
    return {key: value for key, value in model_to_dict(row).items() if key not in TIMES_AND_ID}


def test_each_call_is_the_row_enqueue_would_store_and_ids_come_in_call_order():
    task = send_email.using(priority=5, delay=60, max_age=30, tags=["t"], metadata={"m": 1},
                            concurrency_key="c")
    calls = [("a@example.com",), ["b@example.com", "x"], {"to": "c@example.com", "subject": "é"}]
    ids = task.enqueue_many(calls)
    twins = [task.enqueue("a@example.com"), task.enqueue("b@example.com", "x"),
             task.enqueue(to="c@example.com", subject="é")]
    assert ids == sorted(ids) and len(set(ids)) == 3
    for pk, twin in zip(ids, twins, strict=True):
        assert stored(pk) == stored(twin.pk)
        row = Job.objects.get(pk=pk)
        assert row.run_at - row.enqueued_at == pytest.approx(dt.timedelta(seconds=60),
                                                             abs=dt.timedelta(seconds=5))
        assert row.expires_at == row.run_at + dt.timedelta(seconds=30)
    assert [Job.objects.get(pk=pk).payload for pk in ids] == [
        {"args": ["a@example.com"], "kwargs": {}},
        {"args": ["b@example.com", "x"], "kwargs": {}},
        {"args": [], "kwargs": {"to": "c@example.com", "subject": "é"}},
    ]


def test_the_manager_takes_a_registered_name_options_and_a_database():
    ids = Job.objects.enqueue_many(add.name, [(1, 2), (3, 4)], queue="other.q",
                                   priority=-3, using="default")
    rows = Job.objects.filter(pk__in=ids).order_by("pk")
    assert [(r.task_name, r.queue, r.priority, r.args) for r in rows] == [
        (add.name, "other.q", -3, [1, 2]),
        (add.name, "other.q", -3, [3, 4]),
    ]
    assert all(r.run_at == r.enqueued_at and r.status == "queued" for r in rows)


def test_values_json_keeps_apart_are_stored_as_given_in_several_batches():
    values = [1, 1.0, True, None, "1", [1], {"1": 1}]
    ids = Job.objects.enqueue_many(takes_anything, [(value,) for value in values], batch_size=2)
    payloads = [Job.objects.get(pk=pk).payload["args"][0] for pk in ids]
    assert repr(payloads) == repr(values)


def test_a_bad_call_anywhere_raises_before_anything_is_inserted():
    calls = [(n, n) for n in range(2500)]
    for bad, error, match in (
        ((object(), 1), InvalidPayload, r"args\[0\]"),
        ((1,), InvalidArguments, "b"),
        (7, InvalidPayload, r"not int \(call 2000\): for a function of one argument, write "
                            r"\(7,\)"),
        ("ab", InvalidPayload, "not str"),
    ):
        calls[2000] = bad
        with pytest.raises(error, match=match):
            add.enqueue_many(calls)
    assert not Job.objects.exists()


def test_a_unique_key_is_refused_with_the_way_that_deduplicates():
    with pytest.raises(InvalidUniqueKey, match=r"enqueue unique jobs one at a time with enqueue"):
        add.using(unique_key="k").enqueue_many([(1, 2), (3, 4)])
    with pytest.raises(TypeError, match=r"enqueue_many\(\) got unknown option\(s\) colour"):
        Job.objects.enqueue_many(add, [(1, 2)], colour="red")
    assert not Job.objects.exists()


def test_no_calls_insert_nothing():
    with CaptureQueriesContext(connection) as queries:
        assert add.enqueue_many([]) == []
        assert add.enqueue_many(iter(())) == []
    assert len(queries) == 0


@pytest.mark.server_database
def test_a_batch_is_one_statement_and_the_calls_are_all_or_nothing():
    with CaptureQueriesContext(connection) as queries:
        ids = Job.objects.enqueue_many(add, ((n, n) for n in range(2500)), batch_size=1000)
    inserts = [q for q in queries if q["sql"].lstrip().upper().startswith(("INSERT", "WITH"))]
    assert len(inserts) == 3 and len(ids) == 2500 == Job.objects.count()
    assert [Job.objects.get(pk=pk).args for pk in (ids[0], ids[1234], ids[-1])] == [
        [0, 0], [1234, 1234], [2499, 2499]]

    Job.objects.all().delete()
    with pytest.raises(RuntimeError), transaction.atomic():
        add.enqueue_many((n, n) for n in range(2500))
        raise RuntimeError("roll back")
    assert not Job.objects.exists()


def test_job_enqueued_receivers_are_sent_each_job():
    received = []

    def receiver(sender, job, **kwargs):
        received.append(job.pk)

    signals.job_enqueued.connect(receiver)
    try:
        ids = add.enqueue_many([(1, 2), (3, 4), (5, 6)])
    finally:
        signals.job_enqueued.disconnect(receiver)
    assert received == ids and Job.objects.filter(pk__in=ids).count() == 3


@pytest.mark.django_db(transaction=True)
def test_in_process_workers_are_woken_at_commit_only():
    event = threading.Event()
    notify.subscribe_in_process(event)
    with transaction.atomic():
        add.enqueue_many([(1, 2), (3, 4)])
        assert not event.is_set()
    assert event.is_set()
    event.clear()
    with pytest.raises(RuntimeError), transaction.atomic():
        add.enqueue_many([(1, 2), (3, 4)])
        raise RuntimeError("roll back")
    assert not event.is_set()
