"""Real workers claiming with a bound (claim/bounded.py) behind a held transaction: no job
is skipped for good, and a job sorted before the bound waits for the next full claim only."""

import datetime as dt
import time

import psycopg
import pytest
from django.db.models import Count
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.conftest import POSTGRESQL, direct_connect_kwargs
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import always_fails, record

# slow: two real workers behind a held transaction, 20-30 s a database (not in the pgbouncer pass).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(900)]

FULL_CLAIM_INTERVAL = 0.5
#: Every full claim counts as slow: the workers claim with a bound all the time, but for one
#: full claim every FULL_CLAIM_INTERVAL. A poll far longer than that: a job sorted before the
#: bound that got claimed soon was claimed by the full claim, not by a poll.
SETTINGS = {"SLOW_CLAIM_SECONDS": 0, "FULL_CLAIM_INTERVAL_SECONDS": FULL_CLAIM_INTERVAL,
            "POLL_INTERVAL_SECONDS": 10, "BACKOFF_SECONDS": 0.2, "MIN_RETRY_DELAY_SECONDS": 0.1,
            "RETRY_JITTER": 0}


def hold_a_snapshot():
    """A report's transaction left open (PostgreSQL: it keeps the ready index's entries of every
    job claimed after it began, which is what the bound skips); None on SQLite."""
    if not POSTGRESQL:
        return None
    held = psycopg.connect(**direct_connect_kwargs())
    held.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    held.execute("SELECT txid_current(), count(*) FROM django_sqlqueue_job")
    return held


def test_bounded_claims_behind_a_held_transaction_skip_no_job_for_good(start_worker):
    workers = [start_worker("--concurrency", "4", settings=SETTINGS) for _ in range(2)]
    wait_until(lambda: all("lease" in worker.output for worker in workers), what="workers up")
    held = hold_a_snapshot()
    try:
        started = time.monotonic()
        while time.monotonic() - started < 2:
            Job.objects.bulk_enqueue([record.prepare(tag="stream") for _ in range(10)])
            # Sorted before what the workers claimed last: a higher priority, a run_at in the
            # past, and retries that come due later (every attempt of always_fails).
            record.using(priority=5).enqueue(tag="urgent")
            record.using(run_at=timezone.now() - dt.timedelta(minutes=1)).enqueue(tag="late")
            always_fails.enqueue("again")
            time.sleep(0.05)
        wait_until(lambda: not Job.objects.exclude(
            status__in=[JobStatus.SUCCEEDED, JobStatus.EXHAUSTED]).exists(),
            timeout=120, what="every job finished", worker=workers[0])
        # Once the stream has stopped and the workers wait: a job sorted before every worker's
        # bound is claimed by the next full claim, not the poll.
        time.sleep(1)
        urgent = record.using(priority=9).enqueue(tag="after the stream")
        wait_until(lambda: Job.objects.filter(pk=urgent.pk, status=JobStatus.SUCCEEDED).exists(),
                   timeout=30, what="the urgent job", worker=workers[0])
    finally:
        if held is not None:
            held.close()
    jobs = Job.objects.filter(task_name="tests.record")
    assert jobs.exclude(status=JobStatus.SUCCEEDED).count() == 0
    runs = dict(Execution.objects.values_list("job_id").annotate(n=Count("id")))
    assert len(runs) == jobs.count() and set(runs.values()) == {1}  # each once, none skipped
    failing = Job.objects.filter(task_name=always_fails.name)
    assert set(failing.values_list("status", "attempts")) == {(JobStatus.EXHAUSTED, 3)}
    urgent = Job.objects.get(pk=urgent.pk)
    waited = (urgent.claimed_at - urgent.enqueued_at).total_seconds()
    # At most one full-claim interval plus this busy machine's delays; the poll is 10 s.
    assert waited < FULL_CLAIM_INTERVAL + 3, waited
