"""PostgreSQL: workers ride out server restarts and killed connections, and wake on NOTIFY."""

import signal
import time

import pytest
from django.db import connection, connections

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.conftest import direct_connect_kwargs
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import add, sleep_for

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]
# Jobs that touch the database while it is down fail and are retried: keep those retries quick.
FAST = {
    "LEASE_SECONDS": 5, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.3,
    "BACKOFF_SECONDS": 0.2, "MIN_RETRY_DELAY_SECONDS": 0.2, "MAX_RETRY_DELAY_SECONDS": 10,
    "MAX_ATTEMPTS": 20,
}


def _all_succeeded(count):
    return Job.objects.filter(status=JobStatus.SUCCEEDED).count() == count


def _enqueue_slow_jobs(count):
    return Job.objects.bulk_enqueue(sleep_for.prepare(0.02, tag="done") for _ in range(count))


def test_workers_survive_postgresql_restarts(start_worker, pg_cluster):
    if pg_cluster is None:
        pytest.skip("needs the suite's own cluster (DATABASE_URL names an outside server)")
    jobs = _enqueue_slow_jobs(400)
    workers = [start_worker("-c", "2", settings=FAST) for _ in range(2)]
    wait_until(lambda: Execution.objects.filter(tag="done").count() > 50, what="progress",
               worker=workers[0])
    for _ in range(2):
        pg_cluster.restart(mode="fast")
        connections.close_all()
        time.sleep(1)
    wait_until(lambda: _all_succeeded(len(jobs)), timeout=120, what="every job",
               worker=workers[0])
    assert all(w.is_running() for w in workers), [w.output for w in workers]
    done = set(Execution.objects.filter(tag="done").values_list("job_id", flat=True))
    assert done == {job.pk for job in jobs}
    assert "database unavailable" in workers[0].output + workers[1].output
    for worker in workers:
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0


def test_workers_survive_terminated_connections(start_worker):
    jobs = _enqueue_slow_jobs(300)
    workers = [start_worker("-c", "2", settings=FAST) for _ in range(2)]
    wait_until(lambda: Execution.objects.filter(tag="done").count() > 20, what="progress",
               worker=workers[0])
    for _ in range(5):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        time.sleep(0.5)
    wait_until(lambda: _all_succeeded(len(jobs)), timeout=120, what="every job",
               worker=workers[0])
    assert all(w.is_running() for w in workers), [w.output for w in workers]
    for worker in workers:
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0


def _pickup_seconds(start_worker, *, settings):
    worker = start_worker(settings=settings)
    wait_until(lambda: "wake-up:" in worker.output, what="the banner", worker=worker)
    time.sleep(1.5)  # let it go idle, waiting for its next poll
    job = add.enqueue(1, 2)
    wait_until(lambda: Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED,
               what="the job", worker=worker, interval=0.01)
    job.refresh_from_db()
    worker.signal(signal.SIGTERM)
    worker.wait()
    return (job.claimed_at - job.enqueued_at).total_seconds(), worker


def test_notify_wakes_an_idle_worker_well_inside_the_poll_interval(start_worker):
    poll = 10.0
    seconds, worker = _pickup_seconds(start_worker, settings={"POLL_INTERVAL_SECONDS": poll})
    assert "LISTEN/NOTIFY" in worker.output
    assert seconds < poll / 4, f"picked up after {seconds:.2f}s"


def test_without_notify_polling_picks_up_within_one_interval(start_worker):
    poll = 1.0
    seconds, worker = _pickup_seconds(
        start_worker, settings={"POLL_INTERVAL_SECONDS": poll, "NOTIFY": False}
    )
    assert "LISTEN/NOTIFY" not in worker.output
    assert seconds <= poll * 1.2 + 0.5, f"picked up after {seconds:.2f}s"


def test_async_jobs_use_a_fresh_connection_after_a_restart(start_worker, pg_cluster):
    if pg_cluster is None:
        pytest.skip("needs the suite's own cluster (DATABASE_URL names an outside server)")
    from tests.testapp.tasks import async_record

    worker = start_worker("-c", "2", settings=FAST)
    first = async_record.enqueue(tag="before")
    wait_until(lambda: Job.objects.get(pk=first.pk).status == JobStatus.SUCCEEDED,
               what="the first async job", worker=worker)
    pg_cluster.restart(mode="fast")
    connections.close_all()
    time.sleep(1)
    second = async_record.enqueue(tag="after")
    wait_until(lambda: Job.objects.get(pk=second.pk).status == JobStatus.SUCCEEDED,
               what="the async job after the restart", worker=worker, timeout=60)
    assert Job.objects.get(pk=second.pk).attempts == 1, Job.objects.get(pk=second.pk).errors
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0


def test_a_job_whose_notify_was_held_back_starts_at_the_second_look_not_the_poll(
    start_worker, settings, monkeypatch
):
    import psycopg

    from django_sqlqueue.enqueue import notify

    monkeypatch.setattr(notify, "_limiter", notify.NotifyLimiter(burst=1))
    limits = {"POLL_INTERVAL_SECONDS": 120.0, "NOTIFY_PER_SECOND": 0.2}  # second look: 10 s
    settings.SQLQUEUE = limits  # this process enqueues with the same limit
    listener = psycopg.connect(**direct_connect_kwargs(), autocommit=True)
    listener.execute(f'LISTEN "{notify.CHANNEL}"')
    worker = start_worker(settings=limits)
    wait_until(lambda: "wake-up:" in worker.output, what="the banner", worker=worker)
    time.sleep(1.5)  # idle, its next poll two minutes away
    first = add.enqueue(1, 1)  # the bucket's one token: NOTIFY
    wait_until(lambda: _all_succeeded(1), timeout=4, what="the notified job", worker=worker)
    held_back = add.enqueue(2, 2)  # no token again for 5 s: no NOTIFY
    assert [n.payload for n in listener.notifies(timeout=0.5)] == ["default"]
    listener.close()
    wait_until(lambda: _all_succeeded(2), timeout=60, what="the held-back job", worker=worker)
    held_back.refresh_from_db()
    first.refresh_from_db()
    assert (held_back.claimed_at - first.enqueued_at).total_seconds() < 60  # not the poll
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0


def _terminate_other_connections():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'"
        )
        return cursor.fetchone()[0]


def test_idle_job_threads_replace_their_killed_connections_before_the_next_job(start_worker):
    """Connections ended while the job threads were idle (a restart, an operator, a failover)
    are checked once the worker has seen a database error, before each thread's next job: the
    jobs do not fail at their first query, not even as interruptions."""
    from tests.conftest import VENDOR
    from tests.testapp.tasks import record

    if VENDOR == "pgbouncer":
        pytest.skip("through PgBouncer a client's connection outlives the server's it used")
    worker = start_worker("-c", "4", settings={**FAST, "MAX_ATTEMPTS": 1})
    warm = Job.objects.bulk_enqueue(record.prepare(tag="warm") for _ in range(40))
    wait_until(lambda: _all_succeeded(len(warm)), what="the warm-up jobs", worker=worker)
    assert _terminate_other_connections() > 0
    wait_until(lambda: "database unavailable while claiming" in worker.output,
               what="the worker to see its claim's connection gone", worker=worker)
    jobs = Job.objects.bulk_enqueue(record.prepare(tag="after") for _ in range(40))
    wait_until(lambda: _all_succeeded(len(warm) + len(jobs)), what="the jobs after the kill",
               worker=worker)
    cut = [job.errors for job in Job.objects.filter(pk__in=[j.pk for j in jobs]) if job.errors]
    assert cut == [], cut
    assert Execution.objects.filter(tag="after").count() == len(jobs)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
