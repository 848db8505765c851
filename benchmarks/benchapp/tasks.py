"""The no-op and pickup tasks, defined with the API of the system under test (BENCH_SYSTEM).

Every system autodiscovers a ``tasks`` module of its installed apps (django-sqlqueue, procrastinate)
or takes a dotted path (django-tasks-db, django-q2), so this one module serves them all.
"""

import os

from benchmarks.processes import record_pickup

SYSTEM = os.environ.get("BENCH_SYSTEM")


def _write(i):
    """The job of the write scenario: one small row, through Django's ORM."""
    from benchmarks.benchapp.models import Order

    Order.objects.create(email=f"customer{i}@example.com", total=i)


if SYSTEM == "sqlqueue":
    from django_sqlqueue import job

    @job
    def noop(i=0):
        return None

    @job
    def pickup(key):
        record_pickup(key)

    @job
    def write(i=0):
        _write(i)

    @job
    def nap(seconds=0.05):
        """The wait_latency scenario's job: long enough that its waiter waits before it ends."""
        import time

        time.sleep(seconds)

    @job(transactional=True)
    def write_transactional(i=0):
        """write, its row committed with its completion (the drain_transactional scenario)."""
        _write(i)

    # The workflow scenarios (benchmarks/workflows.py).
    @job
    def step(previous):
        return previous + 1

    @job
    def chain_done(previous, tag=""):
        record_pickup(f"{tag}:{previous}")

    @job
    def fanin_done(results, tag=""):
        record_pickup(f"{tag}:{sum(result is not None for result in results)}")

elif SYSTEM in ("django_tasks_db", "dj_queue"):  # Django's Tasks framework, their backends
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

    @app.task(name="write")
    def write(i=0):
        _write(i)

elif SYSTEM in ("celery", "celery_solo"):
    from benchmarks.celery_app import app

    @app.task
    def noop(i=0):
        return None

    @app.task
    def pickup(key):
        record_pickup(key)

    @app.task
    def write(i=0):
        _write(i)

else:  # django-q2 and RQ take plain functions (by dotted path)

    def noop(i=0):
        return None

    def pickup(key):
        record_pickup(key)

    def write(i=0):
        _write(i)
