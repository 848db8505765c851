"""Settings for the test suite.

The suite runs once per database vendor: ``SQLQUEUE_TEST_DATABASE=sqlite``, ``postgresql`` (the
default), ``pgbouncer`` or ``mariadb``. With ``DATABASE_URL`` set, that server is used; otherwise
the suite starts a throwaway server (tests/postgres_cluster.py, tests/mariadb_server.py) and fills
in HOST and PORT below.
"""

import json
import os
import tempfile
import threading
from pathlib import Path

import django
import environ

env = environ.Env()
VENDOR = os.environ.get("SQLQUEUE_TEST_DATABASE", "postgresql")
SCRATCH = Path(os.environ.get("SQLQUEUE_TEST_SCRATCH", tempfile.gettempdir())) / "sqlqueue-tests"
SCRATCH.mkdir(parents=True, exist_ok=True)

SQLITE_OPTIONS = {"timeout": 60, "init_command": "PRAGMA journal_mode=WAL;"}


def _sqlite(name):
    path = str(SCRATCH / f"{name}-{os.getpid()}.sqlite3")
    # A file, not :memory:, so that worker subprocesses see the same test database.
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": path,
        "TEST": {"NAME": path.replace(".sqlite3", "-test.sqlite3")},
        "OPTIONS": SQLITE_OPTIONS,
    }


if VENDOR not in ("sqlite", "postgresql", "pgbouncer", "mariadb"):
    raise RuntimeError(
        f"SQLQUEUE_TEST_DATABASE={VENDOR!r}: use 'sqlite', 'postgresql', 'pgbouncer' or 'mariadb'."
    )
if "DATABASE_URL" in os.environ:
    # A given server, or (in worker subprocesses) the test database of the parent run.
    DATABASES = {"default": env.db("DATABASE_URL")}
    if VENDOR == "sqlite":
        DATABASES["default"]["OPTIONS"] = SQLITE_OPTIONS
elif VENDOR == "sqlite":
    DATABASES = {"default": _sqlite("default")}
elif VENDOR == "mariadb":
    from tests.mariadb_server import PASSWORD, USER

    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "NAME": "sqlqueue",
            "USER": USER,
            "PASSWORD": PASSWORD,
            "HOST": "127.0.0.1",
            "PORT": "",  # set by the throwaway server fixture in conftest.py
            "OPTIONS": {"charset": "utf8mb4"},
            "TEST": {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"},
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "sqlqueue",
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": "",  # set by the throwaway cluster fixture in conftest.py
        }
    }
if VENDOR == "pgbouncer":
    # PostgreSQL through a transaction-pooling PgBouncer (tests/pgbouncer.py), set up as
    # docs/scaling.md says: no server-side cursors, and (Django's default) no persistent
    # connections needed; Django's psycopg 3 cursors bind client-side, so nothing is prepared.
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
for extra in ("other", "jobs"):  # business data elsewhere; the queue's own database
    if os.environ.get(f"{extra.upper()}_DATABASE_URL"):  # a worker subprocess: the parent's
        DATABASES[extra] = env.db(f"{extra.upper()}_DATABASE_URL")
        if VENDOR == "sqlite":
            DATABASES[extra]["OPTIONS"] = SQLITE_OPTIONS
    elif VENDOR == "sqlite":
        DATABASES[extra] = _sqlite(extra)
    else:
        DATABASES[extra] = {
            **DATABASES["default"],
            "NAME": DATABASES["default"]["NAME"] + f"_{extra}",
            "TEST": {**DATABASES["default"].get("TEST", {}),
                     "NAME": "test_" + DATABASES["default"]["NAME"] + f"_{extra}"},
        }

# Whole DATABASES entries by alias, over the above, for what a URL cannot say: a multi-host
# failover pair as "default" (tests/chaos/test_failover.py), a second primary as "bulk_jobs"
# (tests/process/test_two_primaries.py), for the subprocesses of those tests.
DATABASES.update(json.loads(os.environ.get("SQLQUEUE_TEST_DATABASES_JSON", "{}")))

SILENCED_SYSTEM_CHECKS = []
if VENDOR == "sqlite":
    # The suite's SQLite has WAL and a timeout but not the IMMEDIATE transactions that
    # docs/getting-started.md recommends (and sqlqueue.W004 asks for): the default transaction
    # mode is the one to hold working too. tests/unit/test_validation.py tests the warning.
    SILENCED_SYSTEM_CHECKS += ["sqlqueue.W004"]

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_sqlqueue",
    "tests.testapp",
]
SECRET_KEY = "tests-only"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASE_ROUTERS = ["tests.testapp.routers.OrdersOnOther"]
if "bulk_jobs" in DATABASES:  # the queue's tables on a second primary too (docs/topology.md)
    DATABASE_ROUTERS = ["tests.testapp.routers.QueueAlsoOnBulkJobs", *DATABASE_ROUTERS]
if os.environ.get("SQLQUEUE_TEST_JOBS_DATABASE"):
    # The queue's tables in the "jobs" database (docs/scaling.md), for worker subprocesses.
    DATABASE_ROUTERS = ["tests.testapp.routers.JobsDatabaseRouter", *DATABASE_ROUTERS]
# Worker subprocesses get their overrides as JSON in SQLQUEUE_TEST_SETTINGS.
SQLQUEUE = {"RETRY_JITTER": 0.0}
if os.environ.get("SQLQUEUE_TEST_LISTEN_URL"):  # the pgbouncer pass: LISTEN around the pooler
    SQLQUEUE["LISTEN_DATABASE"] = os.environ["SQLQUEUE_TEST_LISTEN_URL"]
SQLQUEUE.update(json.loads(os.environ.get("SQLQUEUE_TEST_SETTINGS", "{}")))
if os.environ.get("SQLQUEUE_TEST_START_A_THREAD"):
    # As a project whose settings start a thread (a metrics exporter, say): the worker's
    # supervisor must not fork then.
    threading.Thread(target=threading.Event().wait, name="settings-thread", daemon=True).start()
if os.environ.get("SQLQUEUE_TEST_IMPORT_PROMETHEUS_CLIENT"):
    # As a project with django-prometheus: prometheus_client is imported, in its single-process
    # mode, before runworker can turn on the multiprocess mode.
    import prometheus_client  # noqa: F401
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_sqlqueue": {"handlers": ["console"], "level": "WARNING"}},
}

if django.VERSION >= (6, 0):
    # Django's Tasks framework through our backend (tests/tasks_backend); "immediate" is a
    # second backend whose tasks our worker must refuse to run.
    TASKS = {
        "default": {
            "BACKEND": "django_sqlqueue.backend.SQLQueueBackend",
            "QUEUES": ["default", "emails"],
        },
        "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
        # Retries set for every task of the backend, which works on Django 6.0 too.
        "retrying": {
            "BACKEND": "django_sqlqueue.backend.SQLQueueBackend",
            "OPTIONS": {
                "MAX_ATTEMPTS": 3,
                "BACKOFF": "tests.testapp.django_tasks.quick_backoff",
            },
        },
    }
    # Workers only run django.tasks from modules imported at start-up.
    SQLQUEUE["TASK_MODULES"] = ["tasks", "jobs", "django_tasks"]

if os.environ.get("SQLQUEUE_TEST_SCHEDULES"):
    # The schedules of tests/testapp/periodic.py, for the workers of
    # tests/process/test_schedules_across_workers.py.
    SQLQUEUE["TASK_MODULES"] = [*SQLQUEUE.get("TASK_MODULES", ("tasks", "jobs")), "periodic"]

if os.environ.get("SQLQUEUE_TEST_SIGNAL_LOG"):
    # Receivers of the @job signals that log to that file
    # (tests/process/test_signals_across_workers.py).
    SQLQUEUE["TASK_MODULES"] = [*SQLQUEUE.get("TASK_MODULES", ("tasks", "jobs")), "signal_log"]

if os.environ.get("SQLQUEUE_TEST_OTEL_FILE"):
    # An OpenTelemetry SDK exporting to that file (tests/process/test_tracing_across_processes.py).
    from tests.support import otel_export

    otel_export.install(os.environ["SQLQUEUE_TEST_OTEL_FILE"])

if os.environ.get("SQLQUEUE_TEST_WORKER_LOGGING"):
    # As a project that leaves the package's loggers alone: runworker prints its log lines
    # itself, at INFO (tests/process/test_log_format.py).
    del LOGGING["loggers"]["django_sqlqueue"]

if os.environ.get("SQLQUEUE_TEST_OLD_CODE"):
    # As a worker deployed before tests/testapp/jobs.py was written: its tasks (chaos.*) are
    # unknown to it (tests/process/test_rolling_deploy.py).
    SQLQUEUE["TASK_MODULES"] = [module for module in SQLQUEUE.get("TASK_MODULES", ("tasks", "jobs"))
                                if module != "jobs"]
