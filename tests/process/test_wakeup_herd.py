"""Idle workers racing for NOTIFYs: only about CLAIMERS_PER_NOTIFY of them claim on each one
(worker/wakeup.py), and every job still runs, once, without waiting for a poll but rarely.

What the database did is counted from ``pg_stat_database`` (transactions in the test database):
once over a quiet window, the idle workers' own work, then over an equal window in which jobs
are enqueued one at a time. Each claiming worker costs a job two transactions (the claim and the
second look after it), and the job costs a few of its own (OWN: its task's row, its outcome, the
claim its freed slot makes). With about CLAIMERS claiming, a job costs 2 x CLAIMERS + OWN; were
every worker to claim, 2 x WORKERS + OWN. The test allows the midpoint.
"""

import time

import pytest
from django.db import connection

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.wakeup import PEERS_REFRESH_SECONDS
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import record

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True), pytest.mark.slow,
              pytest.mark.timeout(900)]

WORKERS = 8
JOBS = 20
CLAIMERS = 2
OWN = 3
POLL_INTERVAL = 5.0
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
    workers = [start_worker("--concurrency", "1", "--poll-interval", str(POLL_INTERVAL),
                            "--no-scheduler",
                            settings={"CLAIMERS_PER_NOTIFY": CLAIMERS})
               for _ in range(WORKERS)]
    wait_until(lambda: Worker.objects.count() == WORKERS, timeout=120, what="workers registered",
               worker=workers[0])
    # Every worker has counted all the others: each counts them after a claim once its count is
    # PEERS_REFRESH_SECONDS old (sooner while young), and an idle one claims once a poll interval
    # (+20% jitter). Waiting for the young counts alone is not enough on a loaded machine: were
    # the workers slow enough to start, the first ones' young counts would all be over before
    # the last one registered.
    time.sleep(PEERS_REFRESH_SECONDS + POLL_INTERVAL * 1.2 + 2)

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
    about_claimers, every_worker = JOBS * (2 * CLAIMERS + OWN), JOBS * (2 * WORKERS + OWN)
    assert spent_on_jobs < (about_claimers + every_worker) / 2, (
        f"{spent_on_jobs} transactions for {JOBS} jobs with {WORKERS} idle workers "
        f"(quiet window: {quiet}); about {CLAIMERS} claiming makes about {about_claimers}, "
        f"every worker claiming {every_worker}")
