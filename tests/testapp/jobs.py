"""Jobs of the chaos tests (tests/chaos). Imported automatically at start-up (an app's jobs.py).

Every one of them records its side effect in ``Run``, keyed by (job id, attempt): a row when the
function starts, its ``finished_at`` when it ends. Loss and duplication are then counted from the
table, not guessed from logs.
"""

import os
import random
import time

from django.utils import timezone

from django_sqlqueue import current_job, job


def start_run(key=""):
    from .models import Run

    this = current_job()
    return Run.objects.create(
        job_id=this.pk, attempt=this.attempts, worker=this.claimed_by or "", pid=os.getpid(),
        key=str(key), started_at=timezone.now(),
    )


def finish_run(run):
    from .models import Run

    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now())


@job(name="chaos.work")
def work(key="", max_sleep_ms=0):
    """The side effect: a Run row, a short random pause (so kills land mid-job), the end time."""
    run = start_run(key)
    if max_sleep_ms:
        time.sleep(random.uniform(0, max_sleep_ms) / 1000)
    finish_run(run)


@job(name="chaos.order")
def order(order_id):
    """Enqueued in the transaction that created the Order: the job must see that row."""
    from .models import Order

    run = start_run(order_id)
    Order.objects.get(pk=order_id)  # DoesNotExist would fail the job: it ran before the commit
    finish_run(run)


@job(name="chaos.flaky")
def flaky(fail_times, key=""):
    """Fails its first ``fail_times`` attempts, then succeeds; every attempt is a Run."""
    run = start_run(key)
    finish_run(run)
    if run.attempt <= fail_times:
        raise RuntimeError(f"planned failure of attempt {run.attempt}")
    return run.attempt


def insert_row(key="", hold_ms=0):
    """The current job's effect: one Execution row tagged ``key`` (a transactional job's is in
    the transaction that records its outcome, a step's in the step's: a row exists once per
    succeeded job or completed step, never for a failed or killed run), then a random pause of
    up to ``hold_ms`` in that transaction (so kills land inside it). Every run is also appended
    to $SQLQUEUE_TEST_RUNS_FILE, outside the transaction: rolled back or not (read by
    ``runs``). Returns the job."""
    from .models import Execution

    this = current_job()
    Execution.objects.create(job_id=this.pk, attempt=this.attempts,
                             worker=this.claimed_by or "", tag=str(key))
    path = os.environ.get("SQLQUEUE_TEST_RUNS_FILE")
    if path:
        with open(path, "a") as file:
            file.write(f"{os.getpid()} {this.pk} {key}\n")
    if hold_ms:
        time.sleep(random.uniform(0, hold_ms) / 1000)
    return this


def runs(path) -> list:
    """(pid, job id, key) of every run ``insert_row`` logged to ``path``, committed or rolled
    back, in the order they were logged (complete lines only: the last may be half written)."""
    if not path.exists():
        return []
    return [(int(pid), int(job_id), key) for pid, job_id, key in (
        line.split(" ", 2) for line in path.read_text().split("\n")[:-1])]


@job(name="chaos.insert_once", transactional=True)
def insert_once(key="", fail_first=0):
    """``insert_row`` (tests/chaos); fails its first ``fail_first`` attempts after writing its
    row (which is rolled back)."""
    this = insert_row(key)
    if this.attempts <= fail_first:
        raise RuntimeError(f"planned failure of attempt {this.attempts}")
    return None


@job(name="chaos.insert_then_lose_connection", transactional=True)
def insert_then_lose_connection():
    """A transactional job whose connection the server ends after its write, before its outcome
    is written, as a restart would (tests/integration/test_transactional_jobs.py)."""
    from tests.support.server_side import end_connection

    insert_row("lost")
    end_connection(current_job()._state.db or "default")


@job(name="chaos.insert_then_wait", transactional=True)
def insert_then_wait(flag):
    """A transactional job that writes its row (``insert_row``: logged), then waits, its
    transaction open, until the file ``flag`` exists: a test restarts the database server
    meanwhile (tests/integration/test_transactional_jobs.py)."""
    from tests.support.waiting import wait_until

    insert_row("waited")
    wait_until(lambda: os.path.exists(flag), what=f"the file {flag}", timeout=120)


@job(name="chaos.insert_and_sleep", transactional=True, timeout=1)
def insert_and_sleep(seconds):
    """A transactional job that outlives its time limit: its row, then a sleep."""
    from .models import Execution

    this = current_job()
    Execution.objects.create(job_id=this.pk, attempt=this.attempts, worker="", tag="slept")
    time.sleep(seconds)
