"""What enqueue and bulk_enqueue write: the returned jobs are their rows, batches are all or
nothing, in-process workers are woken once per transaction, after commit."""

import datetime as dt
import threading

import pytest
from django.db import DataError, connection, transaction
from django.db.models import signals
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_sqlqueue.db import ops
from django_sqlqueue.enqueue import notify
from django_sqlqueue.exceptions import InvalidPayload
from django_sqlqueue.models import Job, Worker
from django_sqlqueue.registry import Task
from tests.testapp.tasks import add, send_email, takes_anything

pytestmark = pytest.mark.django_db


def as_stored(job) -> dict:
    return {**model_to_dict(job), "id": job.pk}


def assert_jobs_are_their_rows(jobs):
    assert all(job.pk is not None and not job._state.adding for job in jobs)
    rows = {row.pk: row for row in Job.objects.filter(pk__in=[job.pk for job in jobs])}
    assert len(rows) == len(jobs)
    for job in jobs:
        assert as_stored(job) == as_stored(rows[job.pk])
        # JSON keeps 1, 1.0 and True apart, so must the insert
        assert repr(job.payload) == repr(rows[job.pk].payload)


def test_enqueue_returns_the_job_as_stored():
    job = send_email.using(delay=60, max_age=30, priority=5).enqueue("a@example.com", subject="é")
    assert job.status == "queued" and job.attempts == 0 and job.errors == []
    assert job.expires_at == job.run_at + dt.timedelta(seconds=30)
    assert_jobs_are_their_rows([job])


def test_bulk_enqueue_returns_the_jobs_as_stored_in_several_batches():
    now = timezone.now()
    jobs = [
        add.prepare(1, 2),
        add.prepare(1.0, 2),
        add.prepare(True, 2),
        send_email.prepare("b@example.com", subject="ü" * 3),
        Job.objects.prepare(add, (3, 4), priority=-7, run_at=now + dt.timedelta(hours=1)),
        Job.objects.prepare(takes_anything, (), {"nested": {"list": [1, 2.5, None, "x"]}},
                            max_age=10),
        Job.objects.prepare("tests.record", (), {"tag": "t"}, timeout=2.5, queue="other.q"),
    ]
    returned = Job.objects.bulk_enqueue(jobs, batch_size=3)
    assert returned == jobs
    assert_jobs_are_their_rows(jobs)
    assert [job.pk for job in jobs] == sorted(job.pk for job in jobs)  # ids in list order


def test_bulk_enqueue_stores_values_that_differ_per_job_in_one_batch_exactly():
    # One batch, so that each of these columns goes in the per-job document, not as a shared
    # parameter: fractions, negative numbers, times, long text, non-ASCII and null in JSON.
    now = timezone.now()
    jobs = [
        Job.objects.prepare(add, (1, 2), timeout=2.5, retry_jitter=0.125, priority=-100,
                            run_at=now + dt.timedelta(microseconds=1), queue="q" * 100,
                            concurrency_key="ключ-1"),
        Job.objects.prepare(add, (3, 4), timeout=0.75, retry_jitter=0.0, priority=100,
                            run_at=now - dt.timedelta(days=3), queue="other.q",
                            concurrency_key="clé 2 😀"),
        Job.objects.prepare(add, ("ünï", None), timeout=1e-3, retry_jitter=1.0, priority=0,
                            run_at=now + dt.timedelta(days=400, microseconds=999999)),
    ]
    assert_jobs_are_their_rows(Job.objects.bulk_enqueue(jobs))


def _inserted_columns(call) -> list:
    """The columns named by each job INSERT that ``call`` sends."""
    with CaptureQueriesContext(connection) as queries:
        call()
    table = Job._meta.db_table
    columns = []
    for query in queries:
        _, found, rest = query["sql"].partition(f"INSERT INTO {connection.ops.quote_name(table)} (")
        if found:
            columns.append([name.strip('"`') for name in rest.split(")", 1)[0].split(", ")])
    return columns


def test_a_job_names_only_the_columns_whose_value_is_not_the_tables_default():
    """A column whose value the row gets without it (the migration's database default) is left
    out of the INSERT, so a plain job pays only for the options it uses; the rows are the jobs
    all the same, and a value that only looks like the default (1.0 for 1) is kept as given."""
    jobs = []
    columns = _inserted_columns(lambda: jobs.append(add.enqueue(1, 2)))
    columns += _inserted_columns(lambda: jobs.append(
        add.using(queue="other.q", priority=1, max_attempts=2, concurrency_key="k").enqueue(3, 4)))
    # The defaults given by name are left out too: the value is what counts, not the option.
    columns += _inserted_columns(lambda: jobs.append(
        add.using(queue="default", priority=0, max_attempts=5, retry_jitter=0.1).enqueue(5, 6)))
    columns += _inserted_columns(lambda: jobs.extend(Job.objects.bulk_enqueue(
        [add.prepare(n, n) for n in range(3)] + [add.using(priority=2).prepare(9, 9)])))
    assert_jobs_are_their_rows(jobs)
    if not ops(connection).inserts_from_document:
        return  # SQLite: Django's bulk_create, which names every column
    # The test settings' RETRY_JITTER (0.0) is not the table's default (0.1): it is named.
    plain = ["task_name", "payload", "retry_jitter", "enqueued_at", "run_at"]
    assert columns[0] == plain
    assert columns[1] == ["task_name", "queue", "payload", "priority", "max_attempts",
                          "retry_jitter", "enqueued_at", "run_at", "concurrency_key"]
    assert columns[2] == ["task_name", "payload", "enqueued_at", "run_at"]
    assert columns[3] == ["task_name", "payload", "priority", "retry_jitter", "enqueued_at",
                          "run_at"]


def test_bulk_enqueue_of_identical_jobs_stores_each():
    jobs = Job.objects.bulk_enqueue([add.prepare(1, 1) for _ in range(5)])
    assert_jobs_are_their_rows(jobs)


def test_bulk_enqueue_stamps_the_enqueue_time_and_keeps_schedules():
    later = timezone.now() + dt.timedelta(hours=1)
    due_now, scheduled = add.prepare(1, 1), Job.objects.prepare(add, (2, 2), run_at=later)
    before = timezone.now()
    Job.objects.bulk_enqueue([due_now, scheduled])
    rows = {job.pk: job for job in Job.objects.all()}
    stamped = rows[due_now.pk].enqueued_at
    assert stamped >= before and rows[scheduled.pk].enqueued_at == stamped
    assert rows[due_now.pk].run_at == stamped  # due from the moment it was enqueued
    assert rows[scheduled.pk].run_at == later


def test_prepare_sends_the_init_signals_of_jobs_while_someone_listens():
    seen = []

    def on_pre_init(sender, args, kwargs, **extra):
        seen.append(("pre_init", sender))

    def on_post_init(sender, instance, **extra):
        seen.append(("post_init", sender, instance.args))

    signals.post_init.connect(on_post_init, sender=Worker)
    try:
        add.prepare(1, 2)  # someone listens, but to another model
        assert seen == []
        signals.pre_init.connect(on_pre_init, sender=Job)
        signals.post_init.connect(on_post_init, sender=Job)
        job = add.prepare(3, 4)
    finally:
        signals.pre_init.disconnect(on_pre_init, sender=Job)
        signals.post_init.disconnect(on_post_init, sender=Job)
        signals.post_init.disconnect(on_post_init, sender=Worker)
    assert seen == [("pre_init", Job), ("post_init", Job, [3, 4])]
    assert_jobs_are_their_rows(Job.objects.bulk_enqueue([job]))


def test_payloads_equal_in_python_but_not_in_json_are_stored_as_given():
    jobs = Job.objects.bulk_enqueue([add.prepare(1, 1), add.prepare(1.0, 1), add.prepare(True, 1)])
    assert_jobs_are_their_rows(jobs)
    assert [type(job.args[0]) for job in Job.objects.order_by("pk")] == [int, float, bool]


def test_a_job_built_by_hand_gets_its_database_defaults():
    job = Job(task_name="tests.record", payload={"args": [], "kwargs": {}})
    Job.objects.bulk_enqueue([job])
    job.refresh_from_db()
    assert (job.status, job.queue, job.attempts, job.max_attempts) == ("queued", "default", 0, 5)


def test_bad_payload_in_a_bulk_list_raises_before_anything_is_inserted():
    with pytest.raises(InvalidPayload, match=r"args\[0\]"):
        Job.objects.bulk_enqueue([add.prepare(1, 2), add.prepare(object(), 2)])
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_batches_of_a_bulk_enqueue_are_all_or_nothing():
    jobs = [add.prepare(n, n) for n in range(5)]
    jobs[-1].payload["args"].append(object())  # changed after prepare(): fails at the insert
    with pytest.raises(TypeError):
        Job.objects.bulk_enqueue(jobs, batch_size=2)
    assert not Job.objects.exists()


@pytest.mark.server_database
@pytest.mark.django_db(transaction=True)
def test_a_batch_the_database_refuses_undoes_the_batches_sent_before_it():
    # On PostgreSQL the batches travel in one pipeline: the first two are inserted before the
    # third fails; on MariaDB one after the other.
    long_named = Task(add.func, "t" * 300, {})
    jobs = [add.prepare(n, n) for n in range(4)] + [long_named.prepare(1, 2)]
    with pytest.raises(DataError):
        Job.objects.bulk_enqueue(jobs, batch_size=2)
    assert not Job.objects.exists() and all(job.pk is None for job in jobs)
    assert len(Job.objects.bulk_enqueue(jobs[:4], batch_size=2)) == 4  # the connection works


@pytest.mark.server_database
def test_an_over_long_value_fails_instead_of_being_cut():
    long_named = Task(add.func, "t" * 300, {})
    for insert in (
        lambda: Job.objects.enqueue(long_named, (1, 2)),
        lambda: Job.objects.bulk_enqueue([long_named.prepare(1, 2), long_named.prepare(3, 4)]),
    ):
        with pytest.raises(DataError), transaction.atomic():
            insert()
    assert not Job.objects.exists()


def test_a_taken_unique_key_returns_the_holder_and_keeps_the_transaction_usable():
    with transaction.atomic():
        first = Job.objects.enqueue(add, (1, 2), unique_key="k")
        again = Job.objects.enqueue(add, (3, 4), unique_key="k")
        other = add.enqueue(5, 6)
    assert again.pk == first.pk and again.args == [1, 2]
    assert Job.objects.count() == 2 and other.pk is not None


def test_settings_changes_apply_to_the_next_enqueue(settings):
    assert add.enqueue(1, 2).queue == "default"
    settings.SQLQUEUE = {**settings.SQLQUEUE, "DEFAULT_QUEUE": "elsewhere", "MAX_ATTEMPTS": 2}
    job = add.enqueue(1, 2)
    assert (job.queue, job.max_attempts) == ("elsewhere", 2)
    assert (add.prepare(1, 2).queue, Job.objects.enqueue(add, (1, 2)).queue) == ("elsewhere",) * 2


@pytest.mark.django_db(transaction=True)
def test_in_process_workers_are_woken_after_commit_and_not_on_rollback():
    event = threading.Event()
    notify.subscribe_in_process(event)
    with transaction.atomic():
        add.enqueue(1, 2)
        Job.objects.bulk_enqueue([add.prepare(3, 4)])
        add.enqueue(5, 6)
        assert not event.is_set()
    assert event.is_set()

    event.clear()
    with pytest.raises(RuntimeError), transaction.atomic():
        add.enqueue(1, 2)
        raise RuntimeError("roll back")
    assert not event.is_set()

    add.enqueue(1, 2)  # outside a transaction: at once
    assert event.is_set()
