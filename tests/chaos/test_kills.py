"""Scenario 1, kills: workers of mixed concurrency are SIGKILLed at random and restarted while they
work through a large queue. Every job ends succeeded, none is lost, a job runs twice only where a
worker died holding it, and never while another worker's lease held it (see ledger.py)."""

import random
import time

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import UNFINISHED_STATUSES, JobStatus
from tests.chaos.conftest import elapsed, sized, with_attempts
from tests.chaos.ledger import tally, unsucceeded
from tests.support.fleet import Fleet, running_pids, seed
from tests.support.waiting import StopWaiting, wait_until
from tests.testapp.jobs import work

pytestmark = [pytest.mark.server_database, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(900)]

# The kills are the proof, not the number of jobs: the queue is topped up as the kills need.
JOBS = sized(2_000, 100_000)
KILLS = sized(10, 300)
TOP_UP = 500  # jobs added whenever fewer are left, so that each kill finds work going on
CONCURRENCIES = sized((1, 2, 4, 1, 2, 4), (1, 2, 4, 8, 1, 2, 4, 8))
# Kills come back fast: a dead worker on this host is found by its pid at the next maintenance
# pass (every 0.5 s) and its jobs are rescued at once, whatever their lease. The lease only
# matters for frozen workers, and must outlast the longest stall of a live one: with 3 s, a
# starved CI machine let leases of live workers expire (a duplicate without a death).
# Each kill interrupts every job its worker held (up to 8 a thread, claimed ahead), and a job
# interrupted goes back behind the rest, so one job can be interrupted by several kills, at most
# one interruption a kill. At its max_interruptions (3 by default, the bound for a job that kills
# its worker) it would end exhausted, by design: this scenario is about loss and overlap, not
# that bound, so its jobs are enqueued with the bound out of reach (above any number of kills;
# it is a job's own, set when it is enqueued: a worker's SQLQUEUE setting does not change it).
# The bound has tests of its own (tests/tasks_backend/test_interruptions.py,
# tests/integration/test_driver_write_statements.py). A CI run whose jobs kept the default
# ended 3 of 3,500 jobs exhausted, 3 interruptions each.
SETTINGS = {
    "LEASE_SECONDS": 10, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.5,
    "MAX_ATTEMPTS": 25, "BACKOFF_SECONDS": 0.1, "MIN_RETRY_DELAY_SECONDS": 0.1,
}
TASK = work.using(max_interruptions=1_000_000)


def _succeeded():
    return Job.objects.filter(status=JobStatus.SUCCEEDED).count()


def test_random_sigkills_lose_no_job(start_worker, reliability, max_attempts):
    rng = random.Random(run_seed := seed())
    jobs = Job.objects.bulk_enqueue(
        TASK.prepare(key=str(n), max_sleep_ms=10) for n in range(JOBS)
    )
    started = time.monotonic()
    settings = with_attempts(SETTINGS, max_attempts)
    fleet = Fleet(start_worker, CONCURRENCIES, settings=settings)
    # Soak mode: kills for at least 10 minutes.
    min_seconds = sized(0, 600)

    def context():
        return (f"{_succeeded()} of {len(jobs)} succeeded, {len(fleet.killed)} kills\n"
                f"{unsucceeded(fleet=fleet)}")

    def succeeded():
        if not fleet.running():
            raise StopWaiting(f"a worker died by itself: {fleet.dead()}")
        if Job.objects.exclude(status__in=[*UNFINISHED_STATUSES, JobStatus.SUCCEEDED]).exists():
            raise StopWaiting(f"a job ended and did not succeed:\n{context()}")
        return _succeeded()

    # Each kill lands at a random point of the work, chosen by progress, not by time: once the
    # fleet got a random 2-50% of a top-up done since the last kill, the victim is a worker
    # running jobs then (a replacement still starting is never one: killing it would interrupt
    # nothing). A top-up before each keeps work ahead of the fleet, so every kill is reached by
    # construction, on any machine. (A kill every 1-2 s until the queue was empty gave a fast
    # machine 2 to 4 kills in a CI run: the fleet drained 4,000 jobs in seconds.) Kills cannot
    # outpace the work: each waits for jobs done since the last.
    while len(fleet.killed) < KILLS or time.monotonic() - started < min_seconds:
        done = succeeded()
        if len(jobs) - done < TOP_UP:
            jobs += Job.objects.bulk_enqueue(TASK.prepare(max_sleep_ms=10)
                                             for _ in range(TOP_UP))
        target = done + round(rng.uniform(0.02, 0.5) * TOP_UP)
        wait_until(lambda t=target: succeeded() >= t, timeout=600, interval=0.05,
                   context=context, what=f"{target} jobs to succeed before kill "
                                         f"{len(fleet.killed) + 1}")
        fleet.kill(rng, among=running_pids())
    wait_until(lambda: succeeded() == len(jobs), what="every job to succeed after the kills",
               timeout=sized(600, 3600), interval=0.2, context=context)
    seconds = elapsed(started)
    assert fleet.running(), f"a worker died by itself: {fleet.dead()}"
    codes = fleet.stop()

    result = tally(killed=fleet.killed)
    reliability(
        "kills", max_attempts=max_attempts, seed=run_seed, workers=len(CONCURRENCIES),
        concurrency="/".join(map(str, CONCURRENCIES)), kills=len(fleet.killed),
        restarts=len(fleet.killed), worker_exits=0, **result.figures(), seconds=seconds,
    )
    assert result.jobs == len(jobs)
    result.assert_clean()
    assert codes == [0] * len(codes), fleet.output()[-5000:]
    assert result.rescued > 0, "no kill landed on a running job"
    assert set(result.causes) <= {
        "worker killed mid-job", "worker killed after the side effect, before recording success",
    }
