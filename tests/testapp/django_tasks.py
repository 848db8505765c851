"""django.tasks Task functions for tests/tasks_backend (Django 6+ only; imported by module path).

Receivers of Django's task signals are connected here, so that a worker process that imports this
module records every signal it sends as an Execution row the tests can read.
"""

import asyncio
import sys

import django
from django.tasks import task
from django.tasks.signals import task_finished, task_started

from .models import Execution


def quick_backoff(exception, task_result):
    return 0.1


def no_retry_for_value_errors(exception, task_result):
    return None if isinstance(exception, ValueError) else 0.1


@task
def add(a, b):
    return a + b


@task(priority=10)
def add_urgent(a, b):
    return a + b


#: Django 6.1 passes extra @task keywords (max_attempts=...) to the backend's task_class;
#: Django 6.0's @task takes none, so there retries come from the backend's OPTIONS only.
TASK_OPTIONS = django.VERSION >= (6, 1)

if TASK_OPTIONS:

    @task(max_attempts=3, backoff=quick_backoff)
    def always_fails(message):
        raise RuntimeError(message)

    @task(max_attempts=5, backoff=no_retry_for_value_errors)
    def fails_with_value_error():
        raise ValueError("no point retrying")


@task(backend="retrying")  # OPTIONS: MAX_ATTEMPTS 3, BACKOFF quick_backoff (tests/settings.py)
def fails_retried_by_options(message):
    raise RuntimeError(message)


@task
def fails_once_by_default(message):
    raise RuntimeError(message)


@task
def reschedules_into_the_past():
    from django_sqlqueue import Reschedule

    raise Reschedule(delay=-5)


@task
def exits(code):
    raise SystemExit(code)


@task
async def async_add(a, b):
    await asyncio.sleep(0)
    return a + b


@task
async def async_sleep(seconds):
    """Started, then a long await: cancelling the job cancels this task."""
    from asgiref.sync import sync_to_async

    from django_sqlqueue import current_job

    job = current_job()
    await sync_to_async(Execution.objects.create)(job_id=job.pk, attempt=job.attempts,
                                                  worker="task", tag="started")
    await asyncio.sleep(seconds)


@task
def record_run(key, sleep_seconds=0.0):
    """At the defaults (one attempt): a Run row, a pause, then its end time, so that a database
    restart lands between the two writes of runs in flight (tests/process/test_interruptions)."""
    import time

    from .jobs import finish_run, start_run

    run = start_run(key)
    time.sleep(sleep_seconds)
    finish_run(run)


@task
def sleeps_on_its_first_attempt(seconds):
    """Its first attempt starts (a Run row) and sleeps, long enough to be killed in; later ones
    return at once."""
    import time

    from .jobs import start_run

    run = start_run("sleeper")
    if run.attempt == 1:
        time.sleep(seconds)


@task
def kills_its_worker():
    """A poison pill: every run kills the process that runs it, as a segfault or the OOM killer
    would."""
    import os
    import signal

    from .jobs import start_run

    start_run("poison")
    os.kill(os.getpid(), signal.SIGKILL)


@task(takes_context=True)
def with_context(context, x):
    return {"attempt": context.attempt, "id": context.task_result.id, "x": x}


@task
def total(values, label=""):
    """A chord's callback (tests/tasks_backend/test_backend_workflows.py)."""
    return {"label": label, "sum": sum(values)}


@task(takes_context=True)
def total_with_context(context, values):
    return [context.task_result.id, sum(values)]


@task(backend="immediate")
def immediate_add(a, b):
    return a + b


@task
def stepped(marker_dir):
    """Durable steps in a django.tasks task (tests/tasks_backend/test_backend_steps.py): two
    steps, and a failure between them in the first run (the first time the file is missing)."""
    from pathlib import Path

    from django_sqlqueue import step

    from .step_tasks import _part

    first = step("step1", _part, 1, marker_dir, False)
    flag = Path(marker_dir, "failed-once")
    if not flag.exists():
        flag.touch()
        raise RuntimeError("planned failure between the steps")
    return [first, step("step2", _part, 2, marker_dir, False)]


@task
def steps_insert_rows(marker_dir, steps, hold_ms=0):
    """Durable steps through kills and a restart (tests/tasks_backend/test_kills.py): ``steps``
    steps, each writing an Execution row (tag ``step{n}``) in its transaction and holding it up
    to ``hold_ms``; returns ``[10, 20, ...]``."""
    from django_sqlqueue import step

    from .step_tasks import _part

    return [step(f"step{n}", _part, n, marker_dir, False, hold_ms) for n in range(1, steps + 1)]


if TASK_OPTIONS:

    @task(transactional=True)
    def inserts_a_row(key, hold_ms=0):
        """A transactional task (Django 6.1's @task keywords): one Execution row, committed with
        its success or not at all (tests/tasks_backend/test_kills.py)."""
        from .jobs import insert_row

        insert_row(key, hold_ms)


def _record(tag, task_result):
    if task_result.task.module_path.startswith(__name__):
        Execution.objects.create(job_id=int(task_result.id), attempt=task_result.attempts,
                                 worker="signal", tag=tag)


def on_started(sender, task_result, **kwargs):
    _record(f"started:{sender.__name__}:{task_result.status}", task_result)


def on_finished(sender, task_result, **kwargs):
    in_except = sys.exc_info()[0] is not None
    _record(f"finished:{task_result.status}:exc={in_except}", task_result)


task_started.connect(on_started, dispatch_uid="tests-started")
task_finished.connect(on_finished, dispatch_uid="tests-finished")


@task
def reports_progress(steps):
    """Reports its progress as an @job does (tests/tasks_backend/test_backend_progress.py)."""
    from django_sqlqueue import report_progress

    for done in range(1, steps + 1):
        report_progress(done, steps, f"step {done}")
    return steps
