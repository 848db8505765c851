"""Django settings for the Django-based systems under test, chosen by ``BENCH_SYSTEM``.

Production-like on purpose: DEBUG off (no query log), no CONN_MAX_AGE tricks beyond the default
(each worker keeps its connection for its life; a web process would use CONN_MAX_AGE as it likes),
each system's own default options.
"""

import os

from benchmarks.dialects import django_database

SYSTEM = os.environ["BENCH_SYSTEM"]

SECRET_KEY = "benchmark-only"  # noqa: S105
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ALLOWED_HOSTS = ["*"]
# PostgreSQL or MariaDB, from the URL's scheme (postgresql:// or mysql://).
DATABASES = {"default": django_database(os.environ["BENCH_DSN"])}
# The pickup_nosync scenario's workers: commits (the claim's above all) do not wait for their WAL
# flush, to measure what that flush adds to the pickup latency. Never the default.
if os.environ.get("BENCH_SYNCHRONOUS_COMMIT") == "off":
    DATABASES["default"]["OPTIONS"] = {"options": "-c synchronous_commit=off"}
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "root": {"handlers": [], "level": "WARNING"}}

if SYSTEM == "sqlqueue":
    INSTALLED_APPS += ["django_sqlqueue"]
    # Only for the concurrent-enqueue scenario's second run: wake-ups (NOTIFY at commit) off.
    if os.environ.get("BENCH_SQLQUEUE_NOTIFY") == "0":
        SQLQUEUE = {"NOTIFY": False}
elif SYSTEM in ("celery", "celery_solo"):
    # Celery's settings come from here (namespace CELERY_); only the broker is set, every other
    # setting at Celery's default (no result backend, prefetch multiplier 4, early ack).
    CELERY_BROKER_URL = os.environ.get("BENCH_REDIS_URL")
elif SYSTEM == "rq":
    INSTALLED_APPS += ["django_rq"]
    RQ_QUEUES = {"default": {"URL": os.environ.get("BENCH_REDIS_URL")}}
elif SYSTEM == "django_tasks_db":
    INSTALLED_APPS += ["django_tasks_db"]
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
elif SYSTEM == "dj_queue":
    INSTALLED_APPS += ["dj_queue"]
    DATABASE_ROUTERS = ["dj_queue.routers.DjQueueRouter"]  # as its README sets it up
    # One `manage.py dj_queue` supervisor; its one worker entry forks as many worker processes as
    # the other systems' workers (BENCH_DJQ_PROCESSES, set by the driver). Every other option at
    # dj-queue's default: 3 threads per worker process, 0.1 s polling, LISTEN/NOTIFY wake-ups,
    # a dispatcher and a scheduler process, successful jobs kept (the scheduler clears them after
    # a day). CONN_MAX_AGE = 60, as dj-queue's README recommends for workers: it closes a
    # thread's connection around each poll and each job (close_old_connections), so with
    # Django's default of 0 each job opened a new connection (drain 100-120 jobs/s against
    # 440-600 in the driver's first runs).
    DATABASES["default"]["CONN_MAX_AGE"] = 60
    TASKS = {"default": {
        "BACKEND": "dj_queue.backend.DjQueueBackend",
        "QUEUES": [],
        "OPTIONS": {"workers": [{"processes": int(os.environ.get("BENCH_DJQ_PROCESSES", "1"))}]},
    }}
elif SYSTEM == "procrastinate":
    INSTALLED_APPS += ["procrastinate.contrib.django"]
elif SYSTEM == "django_q2":
    INSTALLED_APPS += ["django_q"]
    # The ORM broker on the default database; everything else as django-q2 ships it, with the
    # worker count set to the benchmark's process count by the driver (BENCH_Q_WORKERS).
    Q_CLUSTER = {
        "name": "bench",
        "orm": "default",
        "workers": int(os.environ.get("BENCH_Q_WORKERS", "2")),
        "timeout": 60,
        "retry": 120,
        "label": "Django Q2",
    }

INSTALLED_APPS += ["benchmarks.benchapp"]
