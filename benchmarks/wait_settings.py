"""Django settings of wait_latency.py: the benchmark's own settings (django_settings.py) on
PostgreSQL, or on the SQLite file ``BENCH_SQLITE`` (then ``BENCH_DSN`` is a placeholder), in WAL
mode as the test suite runs it."""

import os

from benchmarks.django_settings import *  # noqa: F403

if os.environ.get("BENCH_SQLITE"):
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["BENCH_SQLITE"],
        "OPTIONS": {"timeout": 60, "init_command": "PRAGMA journal_mode=WAL;",
                    "transaction_mode": "IMMEDIATE"},
    }}
