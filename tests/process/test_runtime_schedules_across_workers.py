"""A schedule created at run time while three real ``runworker`` processes race to tick it: one
job per tick, none missing; an edit fences out the old definition; after its deletion has
committed, no job of it is enqueued (checked once every worker has exited, so no scheduler pass
can still be on its way)."""

import datetime as dt
import signal
from collections import Counter

import pytest

from django_sqlqueue.db.clock import database_now
from django_sqlqueue.models import Job, Worker
from django_sqlqueue.schedules.runtime import add_schedule, remove_schedule, update_schedule
from django_sqlqueue.statuses import JobStatus
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
NAME, WITNESS = "made-at-run-time", "witness"
STEP = dt.timedelta(seconds=1)
SETTINGS = {"LEASE_SECONDS": 3, "MAINTENANCE_INTERVAL_SECONDS": 0.5,
            "POLL_INTERVAL_SECONDS": 0.3, "BACKOFF_SECONDS": 0.2}


def jobs_of(name) -> list:
    return sorted((job for job in Job.objects.filter(unique_key__startswith=f"schedule:{name}@")
                   if job.schedule_name == name), key=lambda job: job.schedule_tick)


def ticks_after(name, instant) -> list:
    return [job.schedule_tick for job in jobs_of(name) if job.schedule_tick > instant]


def assert_one_job_per_tick(jobs) -> None:
    per_tick = Counter(job.schedule_tick for job in jobs)
    assert set(per_tick.values()) == {1}, [t for t, n in per_tick.items() if n > 1]
    first, last = min(per_tick), max(per_tick)
    expected = {first + k * STEP for k in range((last - first) // STEP + 1)}
    assert set(per_tick) == expected, sorted(expected - set(per_tick))  # none missing


@pytest.mark.timeout(600)
def test_a_runtime_schedule_fires_once_per_tick_across_three_workers_and_never_after_deletion(
        start_worker):
    workers = [start_worker("-c", "2", name=f"w{n}", settings=SETTINGS) for n in range(2)]
    wait_until(lambda: Worker.objects.count() == 2, what="two workers", worker=workers)
    created = add_schedule(NAME, "tests.record", every=1, kwargs={"tag": "first"})
    add_schedule(WITNESS, "tests.record", every=1, kwargs={"tag": "witness"})
    # The third worker syncs the (no) declared schedules at start: the run-time ones stay.
    workers.append(start_worker("-c", "2", name="w2", settings=SETTINGS))
    wait_until(lambda: len(ticks_after(NAME, created.created_at)) >= 5, timeout=120,
               what="5 ticks", worker=workers)

    update_schedule(NAME, kwargs={"tag": "edited"})
    edited_at = database_now("default")
    wait_until(lambda: len(ticks_after(NAME, edited_at)) >= 5, timeout=120,
               what="5 ticks after the edit", worker=workers)

    remove_schedule(NAME)  # committed when it returns (autocommit)
    deleted_at = database_now("default")
    at_deletion = {job.pk for job in jobs_of(NAME)}
    # The schedulers go on (the witness ticks past the deletion), then every worker exits: no
    # pass that read the schedule before its deletion can still be running.
    wait_until(lambda: len(ticks_after(WITNESS, deleted_at)) >= 3, timeout=120,
               what="the witness to tick past the deletion", worker=workers)
    assert all(worker.is_running() for worker in workers), [w.output for w in workers]
    wait_until(lambda: all(job.status == JobStatus.SUCCEEDED for job in jobs_of(NAME)),
               timeout=120, what="the schedule's jobs to run", worker=workers)
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait() == 0, worker.output

    jobs = jobs_of(NAME)
    assert {job.pk for job in jobs} == at_deletion  # nothing after the deletion
    assert_one_job_per_tick(jobs)
    assert_one_job_per_tick(jobs_of(WITNESS))
    tags = [job.payload["kwargs"]["tag"] for job in jobs]
    assert tags == sorted(tags, key=["first", "edited"].index)  # never the old after the new
    assert tags.count("edited") >= 5 and "first" in tags
    enqueuers = Counter(job.payload["schedule"]["by"].split(":")[0] for job in jobs)
    print(f"\n{len(jobs)} ticks enqueued by {dict(enqueuers)}")
