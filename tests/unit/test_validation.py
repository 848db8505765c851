"""Everything a caller can get wrong is refused at the enqueue boundary, with a message naming the
problem, and nothing is written. Also: @job options, settings.SQLQUEUE, and the retry delay."""

import datetime as dt
import decimal
import json
import uuid
from io import StringIO

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from django_sqlqueue import enqueue_on_commit, job
from django_sqlqueue.conf import get_settings
from django_sqlqueue.enqueue import validation
from django_sqlqueue.exceptions import (
    InvalidArguments,
    InvalidJob,
    InvalidPayload,
    InvalidPriority,
    InvalidQueueName,
    InvalidRetryPolicy,
    InvalidSchedule,
    InvalidUniqueKey,
    UnknownTask,
)
from django_sqlqueue.models import Job
from django_sqlqueue.registry import get_task, registered_names
from django_sqlqueue.run.retry import retry_delay_seconds
from tests.testapp.models import Order
from tests.testapp.tasks import add, takes_anything

pytestmark = pytest.mark.django_db

UTC = dt.timezone.utc


def refused(exc_class, *, args=(1, 2), kwargs=None, task=add, **options):
    """Enqueue with the given values, expect ``exc_class``, check no row was written."""
    with pytest.raises(exc_class) as info:
        Job.objects.enqueue(task, args, kwargs, **options)
    assert not Job.objects.exists()
    return str(info.value)


# ---- payload ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, kwargs, expected",
    [
        ((dt.datetime(2024, 1, 2, tzinfo=UTC),), None,
         ["args[0]", "datetime.datetime", "isoformat"]),
        ((dt.date(2024, 1, 2),), None, ["args[0]", "datetime.date", "isoformat"]),
        ((1, object()), None, ["args[1]", "builtins.object", "not JSON-serialisable"]),
        ((), {"tags": {"a"}}, ["kwargs['tags']", "{'a'}", "builtins.set"]),
        ((b"raw",), None, ["args[0]", "b'raw'", "builtins.bytes"]),
        ((decimal.Decimal("1.5"),), None, ["args[0]", "decimal.Decimal",
                                           "pass str(value) and make it a Decimal again"]),
        ((uuid.UUID(int=7),), None, ["args[0]", "uuid.UUID",
                                     "pass str(value) and make it a UUID again"]),
        ((1, float("nan")), None, ["args[1] is nan", "JSON cannot store"]),
        ((), {"limit": float("inf")}, ["kwargs['limit'] is inf"]),
        ((), {"by_id": {1: "a"}}, ["kwargs['by_id']", "key 1 (int)", "must be strings"]),
        ((), {1: "a"}, ["kwargs has the key 1 (int)"]),
        ((), {"a": [dt.time(12, 0)]}, ["kwargs['a'][0]", "datetime.time"]),
        ((), {"a": [{"b": (1, {2.5})}]}, ["kwargs['a'][0]['b'][1]", "{2.5}"]),
        (([[[object()]]],), None, ["args[0][0][0][0]", "builtins.object"]),
        ("12", None, ["args must be a list or tuple, not str"]),
        ((), [("a", 1)], ["kwargs must be a dict, not list"]),
    ],
)
def test_payload_not_plain_json_is_refused(args, kwargs, expected):
    message = refused(InvalidPayload, args=args, kwargs=kwargs)
    for fragment in expected:
        assert fragment in message


def test_model_instance_in_payload_is_refused_with_a_hint_to_pass_its_pk():
    order = Order.objects.create(total=5)
    message = refused(InvalidPayload, args=(), kwargs={"order": order})
    assert "kwargs['order']" in message
    assert "tests.testapp.models.Order" in message
    assert "pass the object's pk" in message


def test_task_enqueue_and_prepare_and_enqueue_on_commit_validate_the_payload_too():
    when = dt.datetime(2024, 1, 2, tzinfo=UTC)
    for call in (add.enqueue, add.prepare, add.enqueue_on_commit):
        with pytest.raises(InvalidPayload, match=r"args\[1\]"):
            call(1, when)
    with pytest.raises(InvalidPayload, match=r"kwargs\['b'\]"):
        enqueue_on_commit(add, (1,), {"b": when})
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "args, kwargs, expected",
    [
        ((), {}, "missing a required argument: 'to'"),
        (("a@example.com",), {"subjet": "Hi"}, "got an unexpected keyword argument 'subjet'"),
        (("a@example.com", "Hi", "extra"), {}, "too many positional arguments"),
        (("a@example.com",), {"to": "b@example.com"}, "multiple values for argument 'to'"),
    ],
)
def test_arguments_the_function_cannot_take_are_refused_at_the_call(args, kwargs, expected):
    """A call that could never run is not stored to fail in the worker, attempt after attempt."""
    from tests.testapp.tasks import send_email

    for call in (send_email.enqueue, send_email.prepare, send_email.enqueue_on_commit,
                 send_email.using(delay=60).enqueue):
        with pytest.raises(TypeError) as info:
            call(*args, **kwargs)
        assert isinstance(info.value, InvalidJob)
        assert str(info.value).startswith(
            f"tests.testapp.tasks.send_email(to, subject=''): {expected}; nothing was enqueued.")
    assert "multiple values" in expected or expected in refused(
        InvalidArguments, task=send_email, args=args, kwargs=kwargs)
    assert not Job.objects.exists()
    send_email.enqueue("a@example.com", subject="Hi")  # what it takes


@pytest.mark.parametrize("method", ["delay", "apply_async"])
def test_celery_s_delay_points_to_enqueue(method):
    with pytest.raises(AttributeError, match=rf"tests.testapp.tasks.add is a django-sqlqueue "
                                             rf"task: it has no \.{method}\(\); call "
                                             rf"\.enqueue\(\*args, \*\*kwargs\)"):
        getattr(add, method)(1, 2)
    with pytest.raises(AttributeError, match="'Task' object has no attribute 'nothing'"):
        add.nothing  # noqa: B018


def test_tuples_are_stored_as_lists_and_plain_json_round_trips():
    kwargs = {"nested": {"list": [1, 2.5, None, True, "é"]}, "pair": (1, 2)}
    job = Job.objects.enqueue(takes_anything, (1, (2, 3)), kwargs)
    job.refresh_from_db()
    assert job.payload == {
        "args": [1, [2, 3]],
        "kwargs": {"nested": {"list": [1, 2.5, None, True, "é"]}, "pair": [1, 2]},
    }


def test_payload_over_max_payload_bytes_is_refused(settings):
    settings.SQLQUEUE = {**settings.SQLQUEUE, "MAX_PAYLOAD_BYTES": 100}
    # {"args":["x..."],"kwargs":{}} is 25 bytes plus the string: 75 characters make 100 bytes.
    Job.objects.enqueue(takes_anything, ["x" * 75])
    assert Job.objects.count() == 1
    Job.objects.all().delete()
    message = refused(InvalidPayload, args=["x" * 76])
    assert "101 bytes" in message
    assert "limit of 100" in message
    assert "MAX_PAYLOAD_BYTES" in message


# ---- task ---------------------------------------------------------------------------------------
def _plain_function(a, b):
    return a + b


def test_unregistered_task_name_is_refused():
    message = refused(UnknownTask, task="tests.testapp.tasks.no_such_task")
    assert "'tests.testapp.tasks.no_such_task'" in message
    assert "not registered" in message


def test_a_moved_task_s_name_points_to_job_name():
    """Jobs queued before send_email moved from shop/tasks.py name its old place."""
    message = refused(UnknownTask, task="shop.tasks.send_email")
    assert message.endswith(
        "If the function was moved or renamed (is it 'tests.testapp.tasks.send_email' now?), "
        "keep its old name with @job(name='shop.tasks.send_email') so that the jobs queued "
        "under it still run.")
    assert "@job(name='tests.testapp.tasks.send_mail')" in refused(
        UnknownTask, task="tests.testapp.tasks.send_mail")


def test_dotted_path_of_a_real_function_is_not_a_task():
    message = refused(UnknownTask, task="os.system", args=["true"])
    assert "'os.system'" in message
    assert "not registered" in message


@pytest.mark.parametrize("task", [_plain_function, add.func, print, 42])
def test_callable_that_is_not_a_registered_task_is_refused(task):
    message = refused(UnknownTask, task=task)
    assert repr(task) in message
    assert "@django_sqlqueue.job" in message


# ---- options ------------------------------------------------------------------------------------
NAIVE = dt.datetime(2030, 1, 1, 12, 0)


@pytest.mark.parametrize(
    "options, exc_class, expected",
    [
        ({"delay": -1}, InvalidSchedule, ["delay is -1 seconds", "zero or more"]),
        ({"delay": dt.timedelta(seconds=-5)}, InvalidSchedule, ["delay is -5.0 seconds"]),
        ({"delay": "10"}, InvalidSchedule, ["delay must be a timedelta", "'10'"]),
        ({"delay": float("nan")}, InvalidSchedule, ["delay must be", "nan"]),
        ({"delay": 5, "run_at": timezone.now()}, InvalidSchedule, ["run_at or delay, not both"]),
        ({"run_at": NAIVE}, InvalidSchedule, ["2030-01-01T12:00:00", "naive", "USE_TZ"]),
        ({"run_at": dt.date(2030, 1, 1)}, InvalidSchedule, ["run_at must be a datetime", "date"]),
        ({"max_age": 0}, InvalidSchedule, ["max_age is 0 seconds", "more than zero"]),
        ({"max_age": -60}, InvalidSchedule, ["max_age is -60 seconds"]),
        ({"timeout": 0}, InvalidSchedule, ["timeout is 0 seconds", "more than zero"]),
        ({"timeout": "1m"}, InvalidSchedule, ["timeout must be", "'1m'"]),
        ({"priority": 101}, InvalidPriority, ["priority 101", "-100", "100"]),
        ({"priority": -101}, InvalidPriority, ["priority -101"]),
        ({"priority": 1.5}, InvalidPriority, ["priority 1.5"]),
        ({"priority": True}, InvalidPriority, ["priority True"]),
        ({"priority": "5"}, InvalidPriority, ["priority '5'"]),
        ({"queue": ""}, InvalidQueueName, ["invalid queue name ''"]),
        ({"queue": "has space"}, InvalidQueueName, ["'has space'"]),
        ({"queue": "x" * 101}, InvalidQueueName, ["'" + "x" * 101 + "'", "1 to 100"]),
        ({"queue": "émoji"}, InvalidQueueName, ["'émoji'"]),
        ({"queue": "-dash"}, InvalidQueueName, ["'-dash'", "starting with"]),
        ({"queue": "a/b"}, InvalidQueueName, ["'a/b'"]),
        ({"queue": "a\n"}, InvalidQueueName, ["'a\\n'"]),
        ({"queue": 7}, InvalidQueueName, ["invalid queue name 7"]),
        ({"max_attempts": 0}, InvalidRetryPolicy, ["max_attempts", "at least 1", "not 0"]),
        ({"max_attempts": -2}, InvalidRetryPolicy, ["not -2"]),
        ({"max_attempts": 2.0}, InvalidRetryPolicy, ["not 2.0"]),
        ({"max_attempts": True}, InvalidRetryPolicy, ["not True"]),
        ({"retry_min_delay": 10, "retry_max_delay": 5}, InvalidRetryPolicy,
         ["retry_min_delay (10)", "retry_max_delay (5)"]),
        ({"retry_min_delay": 7200}, InvalidRetryPolicy, ["retry_min_delay (7200)"]),
        ({"retry_backoff": -1}, InvalidRetryPolicy, ["retry_backoff is -1 seconds"]),
        ({"retry_max_delay": "1h"}, InvalidRetryPolicy, ["retry_max_delay", "'1h'"]),
        ({"retry_jitter": 1.5}, InvalidRetryPolicy, ["retry_jitter", "0 to 1", "1.5"]),
        ({"retry_jitter": -0.1}, InvalidRetryPolicy, ["-0.1"]),
        ({"retry_jitter": True}, InvalidRetryPolicy, ["not True"]),
        ({"unique_key": ""}, InvalidUniqueKey, ["unique_key", "not ''"]),
        ({"unique_key": "k" * 256}, InvalidUniqueKey, ["at most 255", "'" + "k" * 256 + "'"]),
        ({"unique_key": 5}, InvalidUniqueKey, ["not 5"]),
        ({"unique_key": b"key"}, InvalidUniqueKey, ["not b'key'"]),
    ],
)
def test_invalid_option_is_refused(options, exc_class, expected):
    message = refused(exc_class, **options)
    for fragment in expected:
        assert fragment in message


def test_option_boundaries_are_accepted():
    job = Job.objects.enqueue(
        add, (1, 2), queue="x" * 100, priority=-100, max_attempts=1, unique_key="k" * 255,
        retry_jitter=1, retry_min_delay=0, delay=0,
    )
    job.refresh_from_db()
    assert (job.queue, job.priority, job.max_attempts) == ("x" * 100, -100, 1)
    assert job.unique_key == "k" * 255
    assert Job.objects.enqueue(add, (1, 2), priority=100, queue="a.b-c_9").priority == 100


def test_queue_name_validator_refuses_none():
    with pytest.raises(InvalidQueueName, match="invalid queue name None"):
        validation.queue_name(None)


def test_queue_none_at_enqueue_means_the_default_queue(settings):
    settings.SQLQUEUE = {**settings.SQLQUEUE, "DEFAULT_QUEUE": "fallback"}
    assert Job.objects.enqueue(add, (1, 2), queue=None).queue == "fallback"


def test_naive_run_at_is_accepted_without_use_tz(settings):
    settings.USE_TZ = False
    assert validation.run_at(NAIVE, None, dt.datetime(2029, 1, 1)) == NAIVE


def test_every_enqueue_error_is_catchable_as_invalid_job_and_value_error():
    for options in ({"priority": 500}, {"queue": ""}, {"delay": -1}, {"unique_key": ""}):
        with pytest.raises(InvalidJob):
            Job.objects.enqueue(add, (1, 2), **options)
        with pytest.raises(ValueError):
            Job.objects.enqueue(add, (1, 2), **options)
    with pytest.raises(InvalidJob):
        Job.objects.enqueue(add, (object(),))
    with pytest.raises(InvalidJob):
        Job.objects.enqueue("no.such.task")
    assert not Job.objects.exists()


@pytest.mark.parametrize("option", ["prioritty", "now", "using_db", "countdown"])
def test_unknown_enqueue_option_is_a_type_error_naming_it(option):
    message = refused(TypeError, **{option: 1})
    assert f"unknown option(s) {option}" in message
    assert "valid options are" in message


def test_unknown_option_to_task_using_is_a_type_error():
    with pytest.raises(TypeError, match="Task.using.. got unknown option.s. bogus"):
        add.using(bogus=1)


# ---- @job ---------------------------------------------------------------------------------------
def _not_yet_a_job():
    return None


NOT_YET = f"{__name__}._not_yet_a_job"


@pytest.mark.parametrize(
    "options, exc_class, fragment",
    [
        ({"queue": "bad name"}, InvalidQueueName, "'bad name'"),
        ({"priority": 500}, InvalidPriority, "priority 500"),
        ({"max_attempts": 0}, InvalidRetryPolicy, "not 0"),
        ({"retry_jitter": 2}, InvalidRetryPolicy, "retry_jitter"),
        ({"max_age": -1}, InvalidSchedule, "max_age is -1"),
        ({"bogus": 1}, TypeError, "bogus"),
        ({"delay": 10}, TypeError, "delay"),
        ({"run_at": timezone.now()}, TypeError, "run_at"),
        ({"unique_key": "k"}, TypeError, "unique_key"),
    ],
)
def test_bad_job_options_fail_at_decoration_and_register_nothing(options, exc_class, fragment):
    with pytest.raises(exc_class) as info:
        job(**options)(_not_yet_a_job)
    assert fragment in str(info.value)
    assert NOT_YET not in registered_names()


def test_nested_function_is_refused_by_job():
    def inner():
        return None

    with pytest.raises(ImproperlyConfigured, match="<locals>.inner.*module level"):
        job(inner)
    assert not [name for name in registered_names() if "<locals>" in name]


@pytest.mark.parametrize("argument", ["emails", 5])
def test_job_with_a_positional_argument_says_how_to_write_it(argument):
    # @job("emails") is how django-rq names a queue.
    with pytest.raises(TypeError) as info:
        job(argument)(_not_yet_a_job)
    if argument == "emails":
        assert str(info.value) == (
            "@job('emails'): @job takes its options as keywords. For a queue, write "
            "@job(queue='emails'); for a task name, @job(name='emails')."
        )
    else:
        assert str(info.value) == "@job(5): decorate a function, e.g. @job or @job(queue=...)."
    assert NOT_YET not in registered_names()


def test_a_task_with_bad_options_still_fails_at_import_when_the_settings_are_bad(settings):
    settings.SQLQUEUE = {"MAX_ATTEMPT": 3}  # sqlqueue.E001 reports it; the import goes on
    with pytest.raises(InvalidQueueName):
        job(queue="not a queue")(_not_yet_a_job)
    assert NOT_YET not in registered_names()


def test_second_function_under_a_taken_name_is_refused():
    with pytest.raises(ImproperlyConfigured, match="two functions are registered as job"):
        job(name="tests.testapp.tasks.add")(_not_yet_a_job)
    assert get_task("tests.testapp.tasks.add").func is add.func


# ---- settings.SQLQUEUE --------------------------------------------------------------------------
# The system check reads every database's features (Django runs the model checks against every
# alias); on MariaDB that connects to each one, unless an earlier test already did.
@pytest.mark.django_db(databases="__all__")
@pytest.mark.parametrize(
    "sqlqueue, expected",
    [
        ({"MAX_ATEMPTS": 3},
         ["unknown key(s) 'MAX_ATEMPTS' (did you mean 'MAX_ATTEMPTS'?)", "valid keys are"]),
        ({"MAX_ATTEMPTS": "5"}, ["SQLQUEUE['MAX_ATTEMPTS'] must be int, not str"]),
        ({"MAX_ATTEMPTS": True}, ["SQLQUEUE['MAX_ATTEMPTS'] must be int, not bool"]),
        ({"MAX_PAYLOAD_BYTES": 1.5}, ["SQLQUEUE['MAX_PAYLOAD_BYTES'] must be int, not float"]),
        ({"LEASE_SECONDS": "60"}, ["SQLQUEUE['LEASE_SECONDS'] must be int or float, not str"]),
        ({"DEFAULT_QUEUE": 1}, ["SQLQUEUE['DEFAULT_QUEUE'] must be str"]),
        ({"TASK_MODULES": "tasks"}, ["SQLQUEUE['TASK_MODULES'] must be list or tuple"]),
        ([("MAX_ATTEMPTS", 3)], ["settings.SQLQUEUE must be a dict, not list"]),
        ({"MAX_ATTEMPTS": 0}, ["MAX_ATTEMPTS must be at least 1"]),
        ({"BACKOFF_SECONDS": -1}, ["BACKOFF_SECONDS must not be negative"]),
        ({"MIN_RETRY_DELAY_SECONDS": 10, "MAX_RETRY_DELAY_SECONDS": 5},
         ["MIN_RETRY_DELAY_SECONDS must not exceed MAX_RETRY_DELAY_SECONDS"]),
        ({"RETRY_JITTER": 1.5}, ["RETRY_JITTER must be a fraction from 0 to 1"]),
        ({"LEASE_SECONDS": 0}, ["LEASE_SECONDS must be positive"]),
        ({"MAX_PAYLOAD_BYTES": 0}, ["MAX_PAYLOAD_BYTES"]),
        ({"MAX_TRACEBACK_CHARS": -1}, ["MAX_TRACEBACK_CHARS"]),
        ({"NOTIFY": 1}, ["SQLQUEUE['NOTIFY'] must be bool, not int"]),
        ({"TIMEOUT_SECONDS": 0}, ["TIMEOUT_SECONDS must be positive or None"]),
        ({"POLL_INTERVAL_SECONDS": 0}, ["POLL_INTERVAL_SECONDS must be positive"]),
    ],
)
def test_bad_settings_raise_improperly_configured_and_fail_the_check(settings, sqlqueue, expected):
    settings.SQLQUEUE = sqlqueue
    with pytest.raises(ImproperlyConfigured) as info:
        get_settings()
    for fragment in expected:
        assert fragment in str(info.value)
    with pytest.raises(ImproperlyConfigured):
        Job.objects.enqueue(add, (1, 2))
    assert not Job.objects.exists()
    with pytest.raises(SystemCheckError) as check:
        call_command("check")
    assert "sqlqueue.E001" in str(check.value)
    assert expected[0] in str(check.value)


@pytest.mark.django_db(databases="__all__")  # the check reads every database
@pytest.mark.parametrize("name", ["SQL_QUEUE", "SQLQUEUES", "SQLQEUE", "DJANGO_SQLQUEUE"])
def test_a_misspelt_sqlqueue_setting_is_a_warning_naming_it(settings, name):
    setattr(settings, name, {"MAX_ATTEMPTS": 9})
    out = StringIO()
    call_command("check", stderr=out)
    assert (f"(sqlqueue.W003) settings.{name} is not read by django-sqlqueue: did you mean "
            f"SQLQUEUE?\n\tHINT: Rename {name} to SQLQUEUE.") in out.getvalue()


@pytest.mark.django_db(databases="__all__")  # the check reads every database
def test_other_queues_settings_are_not_taken_for_a_misspelt_sqlqueue(settings):
    settings.SQS_QUEUE, settings.RQ_QUEUES = "jobs", {"default": {}}
    out = StringIO()
    call_command("check", stderr=out)
    assert "sqlqueue.W003" not in out.getvalue()


@pytest.mark.django_db(databases="__all__")  # the check reads every database
@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's options")
@pytest.mark.parametrize("options, missing", [
    ({}, ['"init_command": "PRAGMA journal_mode=WAL;"', '"timeout": 20',
          '"transaction_mode": "IMMEDIATE"']),  # startproject's settings
    ({"init_command": "PRAGMA journal_mode = wal", "timeout": 5},
     ['"transaction_mode": "IMMEDIATE"']),
    ({"init_command": "PRAGMA journal_mode=WAL;", "timeout": 20, "transaction_mode": "IMMEDIATE"},
     []),
])
def test_sqlite_without_the_recommended_options_is_a_warning_naming_them(
        settings, monkeypatch, options, missing):
    settings.SILENCED_SYSTEM_CHECKS = []
    monkeypatch.setitem(connection.settings_dict, "OPTIONS", options)
    out = StringIO()
    call_command("check", stderr=out)
    if missing:
        assert (f"(sqlqueue.W004) the jobs database 'default' lacks the recommended OPTIONS "
                f"{', '.join(missing)}: ") in out.getvalue()
    else:
        assert "sqlqueue.W004" not in out.getvalue()


@pytest.mark.django_db(databases="__all__")  # the check reads every database
def test_the_options_warning_is_for_sqlite_only(settings):
    settings.SILENCED_SYSTEM_CHECKS = []
    out = StringIO()
    call_command("check", stderr=out)
    assert ("sqlqueue.W004" in out.getvalue()) == (connection.vendor == "sqlite")


@pytest.mark.django_db(databases="__all__")  # as above: the check reads every database
def test_valid_settings_pass_the_check_and_apply(settings):
    settings.SQLQUEUE = {"MAX_ATTEMPTS": 9, "DEFAULT_QUEUE": "main", "LEASE_SECONDS": 5}
    call_command("check")  # raises SystemCheckError on any error
    job = Job.objects.enqueue(add, (1, 2))
    assert (job.queue, job.max_attempts) == ("main", 9)


@pytest.mark.parametrize(
    "key, value",
    [
        ("LEASE_SECONDS", float("nan")),  # claim() then raises ValueError
        ("LEASE_SECONDS", float("inf")),  # claim() then raises OverflowError
        ("MAX_RETRY_DELAY_SECONDS", float("inf")),  # every enqueue then raises InvalidRetryPolicy
    ],
)
def test_non_finite_durations_in_settings_are_refused(settings, key, value):
    settings.SQLQUEUE = {key: value}
    with pytest.raises(ImproperlyConfigured, match=key):
        get_settings()


def test_invalid_default_queue_in_settings_is_refused(settings):
    settings.SQLQUEUE = {"DEFAULT_QUEUE": "has space"}
    with pytest.raises(ImproperlyConfigured, match="DEFAULT_QUEUE"):
        get_settings()


def test_settings_are_checked_once_and_again_after_a_change(settings):
    assert get_settings() is get_settings()
    before = get_settings()
    settings.SQLQUEUE = {**settings.SQLQUEUE, "MAX_ATTEMPTS": 7}
    assert get_settings() is not before and get_settings().MAX_ATTEMPTS == 7
    settings.SQLQUEUE = {"MAX_ATTEMPTS": 0}
    for _ in range(2):  # invalid settings are never kept: every call raises
        with pytest.raises(ImproperlyConfigured, match="MAX_ATTEMPTS must be at least 1"):
            get_settings()


def test_a_task_checks_its_options_again_when_the_settings_change(settings):
    task = add.using(retry_min_delay=100)
    assert task.job_defaults() is task.job_defaults()
    settings.SQLQUEUE = {**settings.SQLQUEUE, "MAX_RETRY_DELAY_SECONDS": 10}
    with pytest.raises(InvalidRetryPolicy, match="retry_min_delay .100. is larger"):
        task.enqueue(1, 2)
    assert not Job.objects.exists()


@pytest.mark.parametrize("length, size", [(37, 99), (38, 101)])
def test_payload_size_is_counted_in_utf8_bytes_at_the_limit(settings, length, size):
    settings.SQLQUEUE = {**settings.SQLQUEUE, "MAX_PAYLOAD_BYTES": 100}
    # {"args":["é..."],"kwargs":{}}: 25 bytes and 2 per "é".
    if size <= 100:
        assert Job.objects.enqueue(takes_anything, ["é" * length]).pk
    else:
        assert f"the payload is {size} bytes" in refused(InvalidPayload, args=["é" * length])


def test_payload_check_accepts_what_json_stores_and_bounds_its_size():
    value = {"a": [1, -(10**30), 2.5e-300, True, None, "\x00é\"", {"b": []}]}
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    assert validation.check_json(value, "kwargs") >= len(compact)


# ---- retry delay --------------------------------------------------------------------------------
POLICY = {"backoff": 5.0, "min_delay": 1.0, "max_delay": 3600.0}


@pytest.mark.parametrize(
    "attempt, expected",
    [(0, 5), (1, 5), (2, 10), (3, 20), (4, 40), (5, 80), (10, 2560), (11, 3600), (10_000, 3600)],
)
def test_retry_delay_doubles_per_attempt_up_to_max(attempt, expected):
    def no_rand():
        raise AssertionError("jitter 0 must not draw a random number")

    assert retry_delay_seconds(attempt, **POLICY, jitter=0, rand=no_rand) == expected


@pytest.mark.parametrize(
    "backoff, min_delay, max_delay, attempt, expected",
    [(0.5, 2, 100, 1, 2), (0, 3, 100, 4, 3), (10, 0, 15, 2, 15), (7, 7, 7, 9, 7)],
)
def test_retry_delay_is_clamped_to_min_and_max(backoff, min_delay, max_delay, attempt, expected):
    delay = retry_delay_seconds(
        attempt, backoff=backoff, min_delay=min_delay, max_delay=max_delay, jitter=0
    )
    assert delay == expected


@pytest.mark.parametrize("rand_value, expected", [(0.0, 90), (0.5, 100), (0.75, 105)])
def test_retry_delay_jitter_spreads_by_the_fraction(rand_value, expected):
    delay = retry_delay_seconds(
        1, backoff=100, min_delay=1, max_delay=1000, jitter=0.1, rand=lambda: rand_value
    )
    assert delay == pytest.approx(expected)


def test_retry_delay_jitter_top_is_just_under_one_plus_jitter():
    top = retry_delay_seconds(1, backoff=100, min_delay=1, max_delay=1000, jitter=0.1,
                              rand=lambda: 0.999999)
    assert 109.99 < top <= 110


def test_retry_delay_jitter_never_leaves_the_bounds():
    high = retry_delay_seconds(20, **POLICY, jitter=0.5, rand=lambda: 0.99)
    low = retry_delay_seconds(1, backoff=1, min_delay=1, max_delay=10, jitter=0.5, rand=float)
    assert (high, low) == (3600, 1)


@given(
    attempt=st.integers(min_value=0, max_value=200),
    backoff=st.floats(min_value=0, max_value=1e6),
    bounds=st.tuples(st.floats(0, 1e5), st.floats(0, 1e5)).map(sorted),
    jitter=st.floats(0, 1),
    rand_value=st.floats(0, 1, exclude_max=True),
)
def test_retry_delay_always_within_bounds(attempt, backoff, bounds, jitter, rand_value):
    low, high = bounds
    delay = retry_delay_seconds(
        attempt, backoff=backoff, min_delay=low, max_delay=high, jitter=jitter,
        rand=lambda: rand_value,
    )
    assert low <= delay <= high
