"""benchmarks/django_settings.py for prune_while_draining.py, plus its workers' SQLQUEUE (JSON in
``BENCH_SQLQUEUE``) and the worker logs at INFO, which show maintenance's passes."""

import json
import os

from benchmarks.django_settings import *  # noqa: F403

SQLQUEUE = json.loads(os.environ.get("BENCH_SQLQUEUE", "{}"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_sqlqueue.worker": {"handlers": ["console"], "level": "INFO"}},
}
