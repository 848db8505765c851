"""Django's validation rules hold through our backend, with Django's exception types; and
`manage.py check` reports misconfigured TASKS entries."""

import datetime as dt

import pytest
from django.core.exceptions import ImproperlyConfigured

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.core.management import call_command  # noqa: E402
from django.core.management.base import SystemCheckError  # noqa: E402
from django.tasks import task  # noqa: E402
from django.tasks.exceptions import InvalidTask  # noqa: E402

from django_sqlqueue.models import Job  # noqa: E402
from tests.testapp import django_tasks as tasks  # noqa: E402

pytestmark = pytest.mark.django_db


def test_a_function_not_at_module_level_is_refused():
    def inner():
        pass

    with pytest.raises(InvalidTask, match="module level"):
        task(inner)


@pytest.mark.parametrize("priority", [101, -101])
def test_priority_out_of_range(priority):
    with pytest.raises(InvalidTask, match="priority"):
        tasks.add.using(priority=priority)


def test_naive_run_after_with_use_tz():
    with pytest.raises(InvalidTask, match="aware"):
        tasks.add.using(run_after=dt.datetime(2030, 1, 1))


def test_arguments_that_are_not_json_raise_typeerror_in_djangos_words_and_ours():
    """Django's own tests (test_enqueue_with_invalid_argument) look for "Unsupported type"."""
    with pytest.raises(TypeError, match="Unsupported type") as raised:
        tasks.add.enqueue(dt.datetime.now(), 1)
    assert "args[0]" in str(raised.value) and "isoformat()" in str(raised.value)
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_aenqueue_with_arguments_that_are_not_json_raises_the_same():
    from asgiref.sync import async_to_sync

    with pytest.raises(TypeError, match="Unsupported type"):
        async_to_sync(tasks.add.aenqueue)(dt.datetime.now(), 1)
    assert not Job.objects.exists()


def test_queue_not_in_queues():
    with pytest.raises(InvalidTask, match="Queue 'reports' is not valid"):
        tasks.add.using(queue_name="reports")
    assert not Job.objects.exists()


@pytest.mark.skipif(not tasks.TASK_OPTIONS, reason="@task(max_attempts=...) needs Django 6.1")
@pytest.mark.parametrize(
    "options, code",
    [
        ({"max_attempts": 0}, "max_attempts must be an integer"),
        ({"backoff": 5}, "backoff must be a callable"),
        ({"timeout": -1}, "timeout must be a positive number"),
        ({"transactional": "yes"}, "transactional must be True or False"),
        ({"transactional": True, "timeout": 3600}, "make it a normal job"),
    ],
)
def test_our_task_options_are_checked(options, code):
    with pytest.raises(InvalidTask, match=code):
        task(**options)(tasks.quick_backoff)


@pytest.mark.skipif(not tasks.TASK_OPTIONS, reason="@task(transactional=...) needs Django 6.1")
def test_a_transactional_task_enqueues_transactional_jobs():
    result = task(transactional=True)(tasks.quick_backoff).enqueue(None, None)
    job = Job.objects.get(pk=result.id)
    assert (job.transactional, job.timeout_seconds) == (True, 30.0)
    with pytest.raises(InvalidTask, match="async function"):
        task(transactional=True)(tasks.async_add.func)


def _check_fails_with(settings, tasks_setting, *codes, installed_apps=None):
    settings.TASKS = tasks_setting
    if installed_apps is not None:
        settings.INSTALLED_APPS = installed_apps
    with pytest.raises(SystemCheckError) as raised:
        call_command("check", databases=["default"])
    for code in codes:
        assert code in str(raised.value)


BACKEND = "django_sqlqueue.backend.SQLQueueBackend"


def test_check_reports_bad_options(settings):
    _check_fails_with(
        settings,
        {"default": {"BACKEND": BACKEND, "OPTIONS": {
            "MAX_ATTEMPTS": 0, "BACKOFF": "no.such.function", "COLOUR": "blue",
            "DATABASE": "nowhere",
        }}},
        "sqlqueue.E102", "sqlqueue.E103", "sqlqueue.E105", "sqlqueue.E106",
    )


def test_check_reports_bad_queue_names(settings):
    _check_fails_with(settings, {"default": {"BACKEND": BACKEND, "QUEUES": ["ok", "not ok"]}},
                      "sqlqueue.E107", "'not ok'")


def test_check_reports_the_app_missing(settings):
    apps = [app for app in settings.INSTALLED_APPS if app != "django_sqlqueue"]
    _check_fails_with(settings, {"default": {"BACKEND": BACKEND}}, "sqlqueue.E101",
                      installed_apps=apps)


def test_without_the_app_the_backend_refuses_work_with_the_check_message(settings):
    # manage.py check says E101 only if django.tasks was imported before the checks ran; the
    # first enqueue must say it whatever the project imported.
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "django_sqlqueue"]
    from django.tasks import task_backends

    backend = task_backends["default"]
    message = ("TASKS['default']: django_sqlqueue is not in INSTALLED_APPS, so there is no jobs "
               'table. Add "django_sqlqueue" to INSTALLED_APPS and run migrate. (sqlqueue.E101)')
    with pytest.raises(ImproperlyConfigured) as enqueue:
        backend.enqueue(tasks.add, [1, 2], {})
    assert str(enqueue.value) == message
    with pytest.raises(ImproperlyConfigured) as lookup:
        backend.get_result("1")
    assert str(lookup.value) == message


def test_a_good_configuration_passes_the_check(settings):
    backoff = "tests.testapp.django_tasks.quick_backoff"
    settings.TASKS = {"default": {"BACKEND": BACKEND, "QUEUES": ["default"],
                                  "OPTIONS": {"MAX_ATTEMPTS": 3, "BACKOFF": backoff}}}
    call_command("check", databases=["default"])
