"""Idle workers racing for NOTIFYs: only about CLAIMERS_PER_NOTIFY of them claim on each one
(worker/wakeup.py), and every job still runs, once, without waiting for a poll but rarely.

What the database did is counted from ``pg_stat_database`` (transactions in the test database):
once over a quiet window, the idle workers' own work, then over an equal window in which jobs
are enqueued one at a time. Were every worker to claim on every NOTIFY, each job would cost
2 x WORKERS transactions (the claim and the second look after it); the test allows half that.
"""

import time

import pytest
from django.db import connection

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.statuses import JobStatus
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import record

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True), pytest.mark.slow,
              pytest.mark.timeout(900)]

WORKERS = 8
JOBS = 20
CLAIMERS = 2
# PostgreSQL publishes a backend's counts when it goes idle, at most once a second, and an idle
# backend's last ones up to 10 s later: each window ends with that long a wait.
STATS_DELAY = 11.0


def transactions() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database "
                       "WHERE datname = current_database()")
        return cursor.fetchone()[0]


def test_about_claimers_per_notify_idle_workers_claim_each_job(start_worker):
    workers = [start_worker("--concurrency", "1", "--poll-interval", "5", "--no-scheduler",
                            settings={"CLAIMERS_PER_NOTIFY": CLAIMERS})
               for _ in range(WORKERS)]
    wait_until(lambda: Worker.objects.count() == WORKERS, timeout=120, what="workers registered",
               worker=workers[0])
    time.sleep(8)  # every worker has counted all the others (at 1, 2, 4 and 8 s)

    window = JOBS * 0.2 + STATS_DELAY
    before = transactions()
    time.sleep(window)
    quiet = transactions() - before - 2  # less this test's own two reads

    before = transactions()
    enqueued_at = {}
    for n in range(JOBS):
        job = record.enqueue(tag=str(n))
        enqueued_at[job.pk] = time.monotonic()
        time.sleep(0.2)
    time.sleep(STATS_DELAY)
    busy = transactions() - before - 2

    done = wait_until(lambda: Job.objects.filter(status=JobStatus.SUCCEEDED).count() == JOBS,
                      timeout=60, what="every job done", worker=workers[0])
    assert done
    runs = list(Execution.objects.values_list("job_id", flat=True))
    assert sorted(runs) == sorted(enqueued_at)  # each job ran once
    spent_on_jobs = busy - quiet - JOBS  # less the enqueues
    assert spent_on_jobs < JOBS * WORKERS, (
        f"{spent_on_jobs} transactions for {JOBS} jobs with {WORKERS} idle workers "
        f"(quiet window: {quiet}); every worker claiming would make {2 * JOBS * WORKERS}")
