"""The wake-up and the heartbeat, one step at a time."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.heartbeat import Heartbeat
from django_sqlqueue.worker.pool import Pool
from django_sqlqueue.worker.resilience import TRANSIENT
from django_sqlqueue.worker.wakeup import FAST_POLL_SECONDS, Wakeup
from tests.conftest import VENDOR
from tests.support.waiting import wait_until
from tests.testapp.tasks import add, sleep_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_notification_wakes_only_a_worker_of_its_queues():
    emails = Wakeup(alias="default", queues=["emails"], poll_interval=60, use_notify=False)
    assert not emails.notified("default,reports")
    assert not emails.wait(timeout=0)
    assert emails.notified("reports,emails")
    assert emails.wait(timeout=0) is True and not emails.wait(timeout=0)  # woken once
    every = Wakeup(alias="default", queues=None, poll_interval=60, use_notify=False)
    assert every.notified("anything") and every.wait(timeout=0)
    assert every.next_poll(rand=lambda low, high: high) == pytest.approx(72)  # +20% at most


def test_a_polling_worker_looks_again_sooner_while_jobs_keep_coming():
    # No NOTIFY (MariaDB, SQLite): after a claim that found jobs the polls come after 50 ms,
    # then twice as long each time, back to the poll interval; idle, once per interval.
    wakeup = Wakeup(alias="default", queues=None, poll_interval=1, use_notify=False)
    middle = lambda low, high: 1.0  # noqa: E731 - no jitter
    assert wakeup.next_poll(rand=middle) == 1
    wakeup.found_jobs()
    waits = [wakeup.next_poll(rand=middle) for _ in range(7)]
    assert waits == pytest.approx([FAST_POLL_SECONDS * 2**n for n in range(5)] + [1, 1])
    wakeup.found_jobs()
    assert wakeup.next_poll(rand=middle) == pytest.approx(FAST_POLL_SECONDS)


def test_after_a_notify_the_worker_looks_once_more_a_moment_later():
    # A job whose NOTIFY the enqueueing process held back (notify.NotifyLimiter) is found by
    # this second look, not by the next poll a minute later.
    wakeup = Wakeup(alias="default", queues=None, poll_interval=60, use_notify=False)
    wakeup.follow_up_seconds = 0.2
    assert wakeup.notified("default") and wakeup.wait() is True  # at once
    started = time.monotonic()
    assert wakeup.wait() is False  # the second look: a timeout, not a wake-up
    assert 0.15 <= time.monotonic() - started < 10  # not the minute-long poll
    assert wakeup._follow_up_at is None  # once per notification


def test_a_beat_fails_the_jobs_past_their_timeout_and_renews_the_others():
    timed_out = []
    pool = Pool(2, alias="default", default_timeout=None, on_slot_free=lambda: None)
    pool.start()
    try:
        slow = sleep_for.using(timeout=5, max_attempts=1).enqueue(0.5)
        other = sleep_for.enqueue(0.5)
        for job in Job.objects.claim(None, "w1", limit=2, lease=5):
            pool.submit(job)
        wait_until(lambda: len([e for e in pool.held() if e.started_at]) >= 2,
                   what="both jobs to start")
        later = time.monotonic() + 60  # the clock, a minute on: past the 5 s timeout
        beat = Heartbeat(worker_id="w1", alias="default", pool=pool, lease_seconds=30,
                         on_timeout=timed_out.append, on_missing_row=lambda: None,
                         clock=lambda: later)
        assert beat.run_once() == 1  # only the job still within its time is renewed
        assert [job.pk for job in timed_out] == [slow.pk]
        failed = Job.objects.get(pk=slow.pk)
        assert failed.status == JobStatus.EXHAUSTED
        assert failed.errors[0]["type"] == "django_sqlqueue.worker.heartbeat.JobTimeout"
        renewed = Job.objects.get(pk=other.pk)
        assert (renewed.lease_expires_at - renewed.claimed_at).total_seconds() > 25
        wait_until(pool.is_idle, what="the slow job's thread to return")
        # The slow job's late success was dropped: the timeout stands.
        assert Job.objects.get(pk=slow.pk).status == JobStatus.EXHAUSTED
        assert Job.objects.get(pk=other.pk).status == JobStatus.SUCCEEDED
    finally:
        pool.stop(wait=10)


@pytest.mark.postgresql
@pytest.mark.skipif(VENDOR == "pgbouncer", reason="the pooler hides which server connection a "
                    "client has: runs in the postgresql pass")
def test_a_heartbeat_that_meets_a_broken_connection_has_the_held_claims_read_back():
    # An outage no job's query and no claim met: the heartbeat's own connection is cut. Its
    # failure counts as trouble, so the job threads read back the held claims before their next
    # job (worker/pool.py), as after a failover.
    pool = Pool(1, alias="default", default_timeout=None, worker_id="w1", on_slot_free=lambda: None)
    add.enqueue(1, 2)
    (job,) = Job.objects.claim(None, "w1", limit=1)
    pool.submit(job)  # held, not started: the pool has no thread
    beat = Heartbeat(worker_id="w1", alias="default", pool=pool, lease_seconds=30,
                     on_timeout=lambda job: None, on_missing_row=lambda: None)

    def backend_pid():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]

    with ThreadPoolExecutor(max_workers=1) as heartbeat_thread:  # one thread, one connection
        try:
            assert heartbeat_thread.submit(beat.run_once).result(timeout=30) == 1
            trouble = pool.gate.trouble
            pid = heartbeat_thread.submit(backend_pid).result(timeout=30)
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            wait_until(lambda: not _backend_alive(pid), what="the heartbeat's backend to end")
            with pytest.raises(TRANSIENT):
                heartbeat_thread.submit(beat.run_once).result(timeout=30)
            assert pool.gate.trouble == trouble + 1
        finally:
            heartbeat_thread.submit(connections.close_all).result(timeout=30)
    Job.objects.filter(pk=job.pk).update(claimed_by="other")  # taken over meanwhile
    assert pool.lost_claims.drop(pool.gate.trouble) == [job]


def _backend_alive(pid) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone()[0] > 0
