"""benchmarks/django_settings.py for django-sqlqueue, with ``SQLQUEUE`` from ``BENCH_SQLQUEUE``
(JSON): the wake-up settings that benchmarks/notify_cost.py compares."""

import json
import os

from benchmarks.django_settings import *  # noqa: F403

SQLQUEUE = json.loads(os.environ.get("BENCH_SQLQUEUE", "{}"))
