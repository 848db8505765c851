"""The no-op and pickup tasks, defined with the API of the system under test (BENCH_SYSTEM).

Every system autodiscovers a ``tasks`` module of its installed apps (django-sqlqueue, procrastinate)
or takes a dotted path (django-tasks-db, django-q2), so this one module serves them all.
"""

import os

from benchmarks.harness import record_pickup

SYSTEM = os.environ.get("BENCH_SYSTEM")

if SYSTEM == "sqlqueue":
    from django_sqlqueue import job

    @job
    def noop(i=0):
        return None

    @job
    def pickup(key):
        record_pickup(key)

elif SYSTEM == "django_tasks_db":
    from django.tasks import task

    @task
    def noop(i=0):
        return None

    @task
    def pickup(key):
        record_pickup(key)

elif SYSTEM == "procrastinate":
    from procrastinate.contrib.django import app

    @app.task(name="noop")
    def noop(i=0):
        return None

    @app.task(name="pickup")
    def pickup(key):
        record_pickup(key)

else:  # django-q2 takes plain functions by dotted path

    def noop(i=0):
        return None

    def pickup(key):
        record_pickup(key)
