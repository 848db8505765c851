"""The benchmark's Django settings (django_settings.py) plus the sleeping jobs' app
(``benchmarks/sleepapp``) and django-sqlqueue's SQLQUEUE as JSON in ``BENCH_SQLQUEUE`` (default:
none, every setting at its default): the settings of ``async_sleep.py``'s drivers and workers and
of ``autoscale_bursty.py``."""

import json
import os

from benchmarks.django_settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "benchmarks.sleepapp"]  # noqa: F405
if os.environ.get("BENCH_SQLQUEUE"):
    SQLQUEUE = json.loads(os.environ["BENCH_SQLQUEUE"])
