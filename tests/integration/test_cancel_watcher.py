"""The worker's cancel watcher, one step at a time (``run_once`` with an injected clock), on a
real pool of job threads: it flags the held job that was cancelled, leaves the others alone, and
past the grace period gives up on a job that ignores the flag, whose thread keeps its slot."""


import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.cancels import CancelWatcher
from django_sqlqueue.worker.pool import Pool
from tests.support.waiting import wait_until
from tests.testapp.tasks import sleep_in_c

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_job_ignoring_its_cancel_is_given_up_on_after_the_grace_and_keeps_its_slot():
    pool = Pool(2, alias="default", default_timeout=None, on_slot_free=lambda: None)
    pool.start()
    now = [0.0]
    stopped = []
    watcher = CancelWatcher(alias="default", pool=pool, grace_seconds=5,
                            on_stopped=stopped.append, clock=lambda: now[0])
    try:
        ignoring = sleep_in_c.enqueue(3)
        other = sleep_in_c.enqueue(0.5)
        ignoring, other = sorted(Job.objects.claim(None, "w", limit=2),
                                 key=lambda job: [ignoring.pk, other.pk].index(job.pk))
        pool.submit(ignoring)
        pool.submit(other)
        wait_until(lambda: all(e.started_at for e in pool.held()), what="both jobs to start")
        assert watcher.run_once().asked == 0  # nothing cancelled: nothing to do
        assert Job.objects.filter(pk=ignoring.pk).cancel(by="ops") == 1
        assert watcher.run_once().asked == 1
        assert ignoring.cancel_requested and not other.cancel_requested
        assert watcher.run_once().asked == 0  # told once
        now[0] = 4.9
        assert watcher.run_once().stopped == 0  # still within its grace
        now[0] = 5.0
        assert watcher.run_once().stopped == 1
        assert [job.pk for job in stopped] == [ignoring.pk]
        row = Job.objects.get(pk=ignoring.pk)
        assert row.status == JobStatus.CANCELLED
        assert "did not stop within 5s" in row.errors[-1]["message"]
        # Its thread is still in time.sleep: its slot is not free until it returns.
        wait_until(lambda: Job.objects.get(pk=other.pk).status == JobStatus.SUCCEEDED
                   and len(pool.held()) == 1,
                   what="the other job to succeed, the cancelled one still held")
        assert pool.free_slots() == 1
        wait_until(pool.is_idle, what="the cancelled job's thread to return")
        assert pool.free_slots() == 2
        assert Job.objects.get(pk=ignoring.pk).status == JobStatus.CANCELLED  # late end dropped
        assert Job.objects.get(pk=other.pk).status == JobStatus.SUCCEEDED
        assert watcher.next_deadline() is None
    finally:
        pool.stop(wait=10)
