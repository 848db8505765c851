"""System checks of a SQLQueueBackend's TASKS entry (``manage.py check``), and of the options
of each ``@task`` made for it."""

from inspect import iscoroutinefunction

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.tasks.exceptions import InvalidTask
from django.utils.module_loading import import_string

from .checks import DATABASE_HINT, database_problem
from .conf import QUEUE_NAME_RE, get_settings
from .enqueue import validation
from .exceptions import InvalidJob

OPTION_NAMES = {"DATABASE", "MAX_ATTEMPTS", "MAX_INTERRUPTIONS", "BACKOFF"}
APP_MISSING = "django_sqlqueue is not in INSTALLED_APPS, so there is no jobs table."
APP_MISSING_HINT = 'Add "django_sqlqueue" to INSTALLED_APPS and run migrate.'


def require_app(backend) -> None:
    """Refuse to use the backend without its app, with sqlqueue.E101's words.

    ``manage.py check`` reports E101 only when ``django.tasks`` was imported before the checks
    ran (Django registers the tasks checks on that import), which a project without this app may
    never do at start-up; so the first enqueue or result lookup says it too.
    """
    if not apps.is_installed("django_sqlqueue"):
        raise ImproperlyConfigured(
            f"TASKS[{backend.alias!r}]: {APP_MISSING} {APP_MISSING_HINT} (sqlqueue.E101)"
        )


def check_backend(backend) -> list:
    where = f"TASKS[{backend.alias!r}]"
    errors = []

    def error(message, hint, code):
        errors.append(checks.Error(f"{where}: {message}", hint=hint, id=f"sqlqueue.{code}"))

    if not apps.is_installed("django_sqlqueue"):
        error(APP_MISSING, APP_MISSING_HINT, "E101")
    unknown = sorted(set(backend.options) - OPTION_NAMES)
    if unknown:
        error(f"unknown OPTIONS {', '.join(unknown)}.",
              f"Valid options are {', '.join(sorted(OPTION_NAMES))}.", "E102")
    alias = backend.options.get("DATABASE")
    if alias is not None and alias not in settings.DATABASES:
        error(f"OPTIONS['DATABASE'] is {alias!r}, which is not in DATABASES.",
              "Name a database alias from settings.DATABASES.", "E103")
    elif apps.is_installed("django_sqlqueue") and backend.database in connections:
        problem = database_problem(backend.database)
        if problem:
            error(f"database {backend.database!r} cannot hold the jobs: {problem}.",
                  DATABASE_HINT, "E104")
    for option, hint in (("MAX_ATTEMPTS", "1 means never retry."),
                         ("MAX_INTERRUPTIONS", "1: a task whose worker dies is not run again.")):
        value = backend.options.get(option)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            error(f"OPTIONS[{option!r}] must be an integer of at least 1, not {value!r}.",
                  hint, "E105")
    backoff = backend.options.get("BACKOFF")
    if backoff is not None:
        try:
            target = import_string(backoff) if isinstance(backoff, str) else backoff
        except ImportError as exc:
            target, problem = None, f"cannot be imported ({exc})"
        else:
            problem = None if callable(target) else "is not callable"
        if problem:
            error(f"OPTIONS['BACKOFF'] {backoff!r} {problem}.",
                  "Give a callable(exception, task_result) -> seconds | None, or its dotted "
                  "path.", "E106")
    bad_queues = sorted(q for q in backend.queues if not QUEUE_NAME_RE.fullmatch(str(q)))
    if bad_queues:
        error(f"QUEUES has names the jobs table cannot use: {', '.join(map(repr, bad_queues))}.",
              "Use 1 to 100 of letters, digits, '_', '.', '-', starting with a letter or digit.",
              "E107")
    return errors


def check_task_options(task) -> None:
    """Refuse a ``@task`` whose options this backend cannot honour (``InvalidTask``, naming
    the option): called when the task is made (``SQLQueueBackend.validate_task``)."""
    for option in ("max_attempts", "max_interruptions"):
        value = getattr(task, option, None)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise InvalidTask(f"{option} must be an integer of at least 1, not {value!r}.")
    backoff = getattr(task, "backoff", None)
    if backoff is not None and not callable(backoff):
        raise InvalidTask(
            "backoff must be a callable(exception, task_result) -> seconds | None."
        )
    timeout = getattr(task, "timeout", None)
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise InvalidTask(f"timeout must be a positive number of seconds, not {timeout!r}.")
    transactional = getattr(task, "transactional", False)
    if transactional is not False:
        try:
            validation.transactional_timeout(transactional, timeout, get_settings())
            validation.not_async_transactional(
                task.module_path, iscoroutinefunction(task.func),
                {"transactional": transactional})
        except InvalidJob as exc:
            raise InvalidTask(str(exc)) from None
