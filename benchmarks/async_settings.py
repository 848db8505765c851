"""The benchmark's Django settings (django_settings.py) plus the async-sleep jobs' app
(``benchmarks/sleepapp``): the settings of ``benchmarks/async_sleep.py``'s drivers and workers."""

from benchmarks.django_settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "benchmarks.sleepapp"]  # noqa: F405
