"""Schedules of the process tests (tests/process/test_schedules_across_workers.py). Only workers
started with SQLQUEUE_TEST_SCHEDULES=1 import this module (tests/settings.py adds it to
TASK_MODULES), so the workers of every other test sync no schedule and enqueue nothing on their
own."""

from django_sqlqueue import schedule

from .tasks import record

schedule(every=2, name="every-2s", kwargs={"tag": "tick"})(record)
