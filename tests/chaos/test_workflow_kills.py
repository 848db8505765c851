"""Workflows through kills (issue 26): workers are SIGKILLed at random and restarted during a
fan-out/fan-in. Nothing is lost (every job ends succeeded), no callback runs before its whole
group has run, and none is released twice: each job was claimed once plus once per
interruption its rescues recorded, its callback included.

Sizes: a chord of 1,000 jobs and 10 chords of 20 (``SQLQUEUE_SOAK=1``: a chord of 10,000)."""

import random
import time
from collections import defaultdict

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.workflows import chord
from tests.chaos.conftest import elapsed, sized
from tests.support.fleet import Fleet, seed
from tests.support.waiting import StopWaiting, wait_until
from tests.testapp.models import Run
from tests.testapp.tasks import flow_step

pytestmark = [pytest.mark.server_database, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(1800)]

BIG_CHORD = sized(1_000, 10_000)
SMALL_CHORDS, SMALL_SIZE = sized((10, 20), (0, 0))
CONCURRENCIES = (4, 4, 4, 4)
MIN_KILLS = 5
# As test_kills.py: a dead worker's jobs are rescued at the next maintenance pass; its jobs'
# interruptions are not limited here (a job may be hit by many kills in a row).
SETTINGS = {
    "LEASE_SECONDS": 10, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.5,
    "MAX_INTERRUPTIONS": 1000,
}


def enqueue_chord(name: str, size: int) -> tuple:
    tags = [f"{name}-{n}" for n in range(size)]
    flow = chord([flow_step.s(tag=tag, sleep_ms=5) for tag in tags],
                 flow_step.s(tag=f"{name}-callback", expect=[tags], sleep_ms=5)).enqueue()
    return [job.pk for job in flow.jobs[:-1]], flow.jobs[-1].pk


def _succeeded():
    return Job.objects.filter(status=JobStatus.SUCCEEDED).count()


def _running_pids() -> set:
    """The pids of the workers running jobs now (a claim's ``claimed_by`` is host:pid:thread)."""
    holders = Job.objects.filter(status=JobStatus.RUNNING).values_list("claimed_by", flat=True)
    return {int(holder.split(":")[1]) for holder in set(holders)
            if holder and holder.count(":") >= 2 and holder.split(":")[1].isdigit()}


def test_kills_during_a_fan_out_and_fan_in_lose_nothing_and_release_each_callback_once(
        start_worker, reliability):
    rng = random.Random(run_seed := seed())
    chords = [enqueue_chord("big", BIG_CHORD)]
    chords += [enqueue_chord(f"small{n}", SMALL_SIZE) for n in range(SMALL_CHORDS)]
    total = Job.objects.count()
    started = time.monotonic()
    fleet = Fleet(start_worker, CONCURRENCIES, settings=SETTINGS)
    done_at_last_kill = -total

    def killing_until_done():
        """A kill every 1-2 s, once the fleet got 2% of a big chord done since the last one (a
        restarted worker on busy cores takes seconds to start). Until MIN_KILLS kills, the
        fleet always has a big chord's worth of work ahead of it: a fast machine drains a chord
        in under a second, and finished before each check (the test then added chords for 25
        minutes, killing none). So the kills are reached by construction, on any machine."""
        nonlocal done_at_last_kill, total
        time.sleep(rng.uniform(1, 2))
        if not fleet.running():
            raise StopWaiting(f"a worker died by itself: {fleet.dead()}")
        done = _succeeded()
        if len(fleet.killed) < MIN_KILLS and total - done < BIG_CHORD:
            chords.append(enqueue_chord(f"more{len(chords)}", BIG_CHORD))
            total = Job.objects.count()
        # The victim is a worker running jobs now: a kill of one still starting up (a
        # replacement; MariaDB's take seconds) would interrupt nothing.
        if (done < total and done - done_at_last_kill >= BIG_CHORD // 50
                and fleet.kill(rng, among=_running_pids()) is not None):
            done_at_last_kill = done
        return done == total

    wait_until(killing_until_done, what="every workflow job to succeed through the kills",
               interval=0, timeout=1500,
               context=lambda: f"{_succeeded()} of {total} succeeded, {len(fleet.killed)} kills")
    seconds = elapsed(started)
    codes = fleet.stop()

    jobs = {job.pk: job for job in Job.objects.all()}
    runs = defaultdict(list)
    for run in Run.objects.all():
        runs[run.job_id].append(run)
    interrupted = sum(job.interruptions for job in jobs.values())
    reliability("workflow kills", seed=run_seed, jobs=total, kills=len(fleet.killed),
                interruptions=interrupted, seconds=seconds)
    assert all(job.status == JobStatus.SUCCEEDED for job in jobs.values())  # nothing lost
    for job in jobs.values():
        # Claimed once, plus once per rescue: never released or claimed an extra time.
        assert job.attempts == 1 + job.interruptions, (job.pk, job.attempts, job.errors)
        assert 1 <= len(runs[job.pk]) <= job.attempts
    for members, callback in chords:
        first_start = min(run.started_at for run in runs[callback])
        for pk in members:  # each member had run to its end before the callback started
            assert min(run.finished_at for run in runs[pk] if run.finished_at) <= first_start
    assert codes == [0] * len(codes), fleet.output()[-5000:]
    assert len(fleet.killed) >= MIN_KILLS
    assert interrupted > 0, "no kill landed on a running job"
