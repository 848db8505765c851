"""Scenario 6, bad input, on both vendors: one table of what callers, SQL writers, operators and
settings can get wrong. Each gets a clear error at the boundary (an exception naming the value,
a refused row, a non-zero exit with a message), or a job that ends failed with a clear message
while the worker keeps running and nothing else is lost."""

import datetime as dt
import os
import signal

import pytest
from django.core.management import ManagementUtility
from django.db import DataError, IntegrityError, connection, transaction
from django.utils import timezone

from django_sqlqueue.exceptions import (
    InvalidPayload,
    InvalidPriority,
    InvalidQueueName,
    InvalidRetryPolicy,
    InvalidSchedule,
    InvalidUniqueKey,
    UnknownTask,
)
from django_sqlqueue.models import Job
from django_sqlqueue.statuses import FINISHED_STATUSES, JobStatus
from django_sqlqueue.worker.maintenance.rescuer import Rescuer, RescuerConfig
from tests.support.waiting import wait_until
from tests.testapp.jobs import work
from tests.testapp.models import Run
from tests.testapp.tasks import add

UTC = dt.timezone.utc
ADD = "tests.testapp.tasks.add"


class Pickles:
    def __reduce__(self):  # what a pickle-based queue would run on load
        return (os.system, ("echo pwned",))


# ---- 1. refused at enqueue: (id, enqueue call, error, message fragment) -----------------------
ENQUEUE = [
    ("datetime-arg", lambda: add.enqueue(dt.datetime(2024, 1, 1, tzinfo=UTC), 1),
     InvalidPayload, "isoformat"),
    ("set-kwarg", lambda: add.enqueue(1, b={2}), InvalidPayload, "not JSON-serialisable"),
    ("bytes-arg", lambda: add.enqueue(b"raw", 1), InvalidPayload, "builtins.bytes"),
    ("nan-arg", lambda: add.enqueue(float("nan"), 1), InvalidPayload, "JSON cannot store"),
    ("int-dict-key", lambda: add.enqueue({1: "a"}, 1), InvalidPayload, "must be strings"),
    ("pickle-payload", lambda: add.enqueue(Pickles(), 1), InvalidPayload, "not JSON-serialisable"),
    ("args-not-a-list", lambda: Job.objects.enqueue(add, "12"), InvalidPayload,
     "args must be a list"),
    ("oversized-payload", lambda: add.enqueue("x" * 1_000_001, 1), InvalidPayload,
     "over the limit"),
    ("unknown-task-name", lambda: Job.objects.enqueue("no.such.task", (1, 2)), UnknownTask,
     "is not registered"),
    ("os.system-by-name", lambda: Job.objects.enqueue("os.system", ("id",)), UnknownTask,
     "is not registered"),
    ("os.system-function", lambda: Job.objects.enqueue(os.system, ("id",)), UnknownTask,
     "is not a job"),
    ("empty-queue", lambda: add.using(queue="").enqueue(1, 2), InvalidQueueName, "''"),
    ("queue-with-space", lambda: add.using(queue="bad queue").enqueue(1, 2), InvalidQueueName,
     "'bad queue'"),
    ("queue-too-long", lambda: add.using(queue="q" * 101).enqueue(1, 2), InvalidQueueName,
     "1 to 100 characters"),
    ("queue-sql", lambda: add.using(queue="x';DROP TABLE t;--").enqueue(1, 2),
     InvalidQueueName, "invalid queue name"),
    ("queue-not-a-string", lambda: add.using(queue=7).enqueue(1, 2), InvalidQueueName, "7"),
    ("priority-out-of-range", lambda: add.using(priority=101).enqueue(1, 2), InvalidPriority,
     "-100 (lowest) to 100"),
    ("max-attempts-zero", lambda: add.using(max_attempts=0).enqueue(1, 2), InvalidRetryPolicy,
     "at least 1"),
    ("negative-delay", lambda: add.using(delay=-1).enqueue(1, 2), InvalidSchedule,
     "zero or more"),
    ("naive-run-at", lambda: add.using(run_at=dt.datetime(2030, 1, 1)).enqueue(1, 2),
     InvalidSchedule, "naive"),
    ("empty-unique-key", lambda: add.using(unique_key="").enqueue(1, 2), InvalidUniqueKey,
     "non-empty string"),
    ("unknown-option", lambda: Job.objects.enqueue(add, (1, 2), retries=3), TypeError,
     "unknown option(s) retries"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("call, error, fragment", [c[1:] for c in ENQUEUE],
                         ids=[c[0] for c in ENQUEUE])
def test_refused_at_enqueue_with_a_clear_error(call, error, fragment):
    with pytest.raises(error) as info:
        call()
    assert fragment in str(info.value)
    assert not Job.objects.exists()


# ---- 2. malformed rows written by SQL that the database refuses: (id, columns) ----------------
SQL_REFUSED = [
    ("unknown-status", {"status": "bogus"}),
    ("negative-attempts", {"attempts": -1}),
    ("priority-out-of-range", {"priority": 1000}),
    ("max-attempts-zero", {"max_attempts": 0}),
    ("null-payload", {"payload": None}),
    ("payload-not-json", {"payload": "{not json"}),
    ("null-task-name", {"task_name": None}),
    ("null-queue", {"queue": None}),
]
COLUMNS = ("task_name", "queue", "payload", "status", "attempts", "priority", "max_attempts")


def insert_row(**values) -> int:
    """INSERT a job row by plain SQL, as another program would; returns its id."""
    row = {"task_name": ADD, "payload": '{"args": [1, 2]}', **values}
    names = [name for name in COLUMNS if name in row]  # our own constants, never user data
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO django_sqlqueue_job ({', '.join(names)}) "  # noqa: S608
            f"VALUES ({', '.join(['%s'] * len(names))}) RETURNING id",
            [row[name] for name in names],
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db
@pytest.mark.parametrize("values", [c[1] for c in SQL_REFUSED], ids=[c[0] for c in SQL_REFUSED])
def test_malformed_sql_rows_are_refused_by_the_database(values):
    with pytest.raises((IntegrityError, DataError)), transaction.atomic():
        insert_row(**values)
    assert not Job.objects.exists()


# ---- 3. broken rows the database accepts: (id, task name, payload, message fragment) ----------
SQL_BROKEN = [
    ("payload-json-null", ADD, "null", "has payload None; it must be a JSON object"),
    ("payload-array", ADD, "[]", "has payload []"),
    ("payload-string", ADD, '"x"', "has payload 'x'"),
    ("payload-number", ADD, "42", "has payload 42"),
    ("args-not-an-array", ADD, '{"args": "12"}', '"args" must be a JSON array'),
    ("kwargs-not-an-object", ADD, '{"kwargs": [1]}', '"kwargs" a JSON object'),
    ("too-few-args", ADD, '{"args": [1]}', "missing 1 required positional argument"),
    ("unexpected-kwarg", ADD, '{"args": [1, 2], "kwargs": {"c": 3}}',
     "unexpected keyword argument 'c'"),
    ("task-os.system", "os.system", '{"args": ["touch MARKER"]}',
     "task 'os.system' is not registered"),
    ("task-empty-name", "", '{"args": []}', "task '' is not registered"),
    ("task-module-path", "tests.testapp.tasks", '{"args": []}', "is not registered"),
]


@pytest.mark.django_db(transaction=True)
def test_broken_rows_fail_with_a_clear_message_and_the_worker_keeps_going(start_worker,
                                                                          tmp_path):
    marker = tmp_path / "pwned"  # what os.system would create, were it run
    good = [work.enqueue(key=f"before-{n}") for n in range(3)]
    broken = {
        case: insert_row(task_name=task, payload=payload.replace("MARKER", str(marker)),
                         max_attempts=1)
        for case, task, payload, _ in SQL_BROKEN
    }
    good += [work.enqueue(key=f"after-{n}") for n in range(3)]
    # A row whose task no worker knows is given back until that has lasted
    # UNKNOWN_TASK_MAX_SECONDS (run/unknown.py), an hour by default: a fraction of a second here.
    worker = start_worker("-c", "2", settings={"POLL_INTERVAL_SECONDS": 0.2,
                                               "UNKNOWN_TASK_DELAY_SECONDS": 0.1,
                                               "UNKNOWN_TASK_MAX_SECONDS": 0.3})
    wait_until(lambda: not Job.objects.exclude(status__in=FINISHED_STATUSES).exists(),
               what="every job to finish", worker=worker)
    assert worker.is_running(), worker.output
    late = work.enqueue(key="late")  # the worker still takes new work
    wait_until(lambda: Job.objects.get(pk=late.pk).status == JobStatus.SUCCEEDED,
               what="a job enqueued after the bad rows", worker=worker)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output

    problems = []
    for case, _, _, fragment in SQL_BROKEN:
        job = Job.objects.get(pk=broken[case])
        message = job.errors[-1]["message"] if job.errors else ""
        if job.status != JobStatus.EXHAUSTED or fragment not in message:
            problems.append((case, job.status, message))
    assert not problems, problems
    assert set(Job.objects.filter(pk__in=[j.pk for j in [*good, late]])
               .values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
    assert sorted(Run.objects.values_list("job_id", flat=True)) == sorted(
        j.pk for j in [*good, late])  # every good job ran once, no bad one ran anything
    assert not marker.exists()


@pytest.mark.django_db
def test_a_running_row_without_a_lease_is_refused_or_rescued():
    """Row 12 of the broken rows: 'running', but no worker holds it and it has no lease."""
    try:
        with transaction.atomic():
            pk = insert_row(status="running")
    except IntegrityError:
        return  # refused by the database: fine too
    a_year_later = timezone.now() + dt.timedelta(days=365)
    # The rescuer, the step of maintenance that takes such rows. (A whole maintenance pass
    # rescues nothing for one lease after the database server started, by the server's own
    # uptime, whatever ``now`` says: outage_grace.py. This test once ran within two seconds of
    # the start of the MariaDB chaos pass's server.)
    assert Rescuer(RescuerConfig(batch_size=10), alias="default").run_once(
        now=a_year_later).rescued == 1
    assert Job.objects.get(pk=pk).status != JobStatus.RUNNING


# ---- 4. bad settings and 5. bad command options: (id, argv or settings, message fragment) -----
SETTINGS = [
    ("lease-negative", {"LEASE_SECONDS": -1}, "LEASE_SECONDS must be positive"),
    ("unknown-key", {"MAX_ATEMPTS": 3},
     "unknown key(s) 'MAX_ATEMPTS' (did you mean 'MAX_ATTEMPTS'?)"),
    ("wrong-type", {"NOTIFY": "yes"}, "SQLQUEUE['NOTIFY'] must be bool, not str"),
    ("bad-default-queue", {"DEFAULT_QUEUE": "bad queue"}, "is not a valid queue name"),
    ("min-over-max-delay", {"MIN_RETRY_DELAY_SECONDS": 9, "MAX_RETRY_DELAY_SECONDS": 1},
     "MIN_RETRY_DELAY_SECONDS must not exceed"),
]
OPTIONS = [
    pytest.param(["runworker", "--concurrency", "0"], "--concurrency must be from 1 to 256",
                 id="concurrency-zero"),
    pytest.param(["runworker", "-c", "two"], "invalid int value: 'two'", id="concurrency-text"),
    pytest.param(["runworker", "--processes", "0"], "--processes must be from 1 to 256",
                 id="processes-zero"),
    pytest.param(["runworker", "--max-jobs", "0"], "--max-jobs must be at least 1",
                 id="max-jobs-zero"),
    pytest.param(["runworker", "--max-memory", "0"], "--max-memory must be more than 0",
                 id="max-memory-zero"),
    pytest.param(["runworker", "--poll-interval", "-1"], "--poll-interval must be more than 0",
                 id="poll-negative"),
    pytest.param(["runworker", "--shutdown-timeout", "-1"], "must be 0 or more",
                 id="shutdown-timeout-negative"),
    pytest.param(["runworker", "--queue", "bad queue"], "invalid queue name 'bad queue'",
                 id="worker-bad-queue"),
    pytest.param(["runworker", "--bogus"], "unrecognized arguments: --bogus",
                 id="worker-unknown-option"),
    pytest.param(["runworker", "--database", "nope"], "--database 'nope' is not in",
                 id="worker-unknown-database"),
    pytest.param(["purgejobs"], "required: --older-than", id="purge-missing-age"),
    pytest.param(["purgejobs", "--older-than", "soon"], "'soon' is not a duration",
                 id="purge-bad-age"),
    pytest.param(["purgejobs", "--older-than", "3"], "'3' has no unit: write it with one, e.g. 3d",
                 id="purge-bare-number"),
    pytest.param(["purgejobs", "--older-than", "7d", "--status", "running"],
                 "only finished jobs can be purged", id="purge-unfinished-status"),
    pytest.param(["purgejobs", "--older-than", "7d", "--queue", "bad queue"],
                 "invalid queue name 'bad queue'", id="purge-bad-queue"),
    pytest.param(["purgejobs", "--older-than", "7d", "--database", "nope"],
                 "--database 'nope' is not in", id="purge-unknown-database"),
]


def manage(argv, capsys):
    """Run ``manage.py ARGV`` as the command line does; returns (exit code, stderr)."""
    with pytest.raises(SystemExit) as info:
        ManagementUtility(["manage.py", *argv, "--burst"] if argv[0] == "runworker"
                          else ["manage.py", *argv]).execute()
    return info.value.code, capsys.readouterr().err


# Every database: the commands run Django's checks, whose MySQL field checks connect to each.
@pytest.mark.django_db(databases="__all__")
@pytest.mark.parametrize("overrides, fragment", [c[1:] for c in SETTINGS],
                         ids=[c[0] for c in SETTINGS])
def test_bad_settings_stop_the_worker_with_a_clear_message(settings, capsys, overrides,
                                                           fragment):
    settings.SQLQUEUE = overrides
    code, err = manage(["runworker"], capsys)
    assert code != 0 and "sqlqueue.E001" in err and fragment in err, err


# Every database: the commands run Django's checks, whose MySQL field checks connect to each.
@pytest.mark.django_db(databases="__all__")
@pytest.mark.parametrize("argv, fragment", OPTIONS)
def test_bad_command_options_exit_non_zero_with_a_clear_message(capsys, argv, fragment):
    code, err = manage(argv, capsys)
    assert code != 0 and fragment in err and "Traceback" not in err, err


def test_the_table_has_at_least_30_bad_inputs(reliability):
    sizes = {"enqueue": len(ENQUEUE), "sql_refused": len(SQL_REFUSED),
             "sql_broken": len(SQL_BROKEN) + 1, "settings": len(SETTINGS), "options": len(OPTIONS)}
    reliability("bad input", cases=sum(sizes.values()), **sizes)
    assert sum(sizes.values()) >= 30
