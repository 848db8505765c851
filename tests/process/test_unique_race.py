"""Eight processes, each with its own connection, enqueue the same unique key with a one-hour
period 1,000 times in all, at once: exactly one job, inserted by exactly one of them; every
other enqueue got that job back. The database's unique index decides (db/job_table.py), not a
read before the insert.

A period starts on the hour (aligned to the epoch), so the go is never given in its last minute;
if a very slow run still crosses into the next hour, that hour is a new period with a job of its
own, and the test holds each period to one job. (With a one-minute period, the go waited for
the first 20 s of a minute: 14 s on average, up to 40 s, in each of the six passes that ran it.)
"""

import math
import time
from collections import Counter

import pytest

from django_sqlqueue.models import Job
from tests.support.start_line import race

pytestmark = pytest.mark.django_db(transaction=True)

PROCESSES, ENQUEUES, PERIOD = 8, 1000, 3600
#: The race takes seconds (its enqueues; the processes started before the go): far less.
RACE_SECONDS = 60


def early_in_a_period():
    """Wait, if need be (one run in 60), until the current period has RACE_SECONDS left."""
    into = time.time() % PERIOD
    if into > PERIOD - RACE_SECONDS:
        time.sleep(PERIOD - into + 0.5)


def test_racing_processes_enqueue_one_job_per_key_and_period(db_url, run_python, tmp_path):
    reports = race(run_python, "tests.support.unique_enqueuer", tmp_path / "start", "sync-42",
                   PERIOD, ENQUEUES // PROCESSES, processes=PROCESSES,
                   env={"DATABASE_URL": db_url()}, before=early_in_a_period, timeout=280)

    jobs = list(Job.objects.all())
    first = min(report["first"] for report in reports)
    last = max(report["last"] for report in reports)
    periods = math.floor(last / PERIOD) - math.floor(first / PERIOD) + 1
    print(f"{len(jobs)} job(s) over {periods} period(s) in {last - first:.1f}s")
    assert len(jobs) == periods  # one in nearly every run: 1,000 enqueues take seconds
    assert Counter(job.unique_slot for job in jobs).most_common(1)[0][1] == 1
    assert all(job.unique_slot.startswith("sync-42@") for job in jobs)
    assert sum(report["inserted"] for report in reports) == len(jobs)
    assert {pk for report in reports for pk in report["ids"]} == {job.pk for job in jobs}
    assert sum(bool(report["ids"]) for report in reports) == PROCESSES  # every one enqueued
