"""The wake-up and the heartbeat, one step at a time."""

import time

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.heartbeat import Heartbeat
from django_sqlqueue.worker.pool import Pool
from django_sqlqueue.worker.wakeup import FAST_POLL_SECONDS, Wakeup
from tests.support.waiting import wait_until
from tests.testapp.tasks import sleep_for

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
