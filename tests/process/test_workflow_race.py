"""Racing worker processes run every workflow's jobs exactly once and in order (issue 26).

8 worker processes take chords and chains at once. Each job records its own run (a Run row:
start, end; tests.flow_step), checks what it received from its parents (a chord's callback, the
list of its group's results in the group's order; a chain's step, the step before's) and fails
if it differs. So: every job ran once (one Run each), every callback started after every job of
its group had finished its run, and every chain's steps ran one after the other. Nothing here is
timed: a callback released early, twice, or with a result missing fails the test whatever the
speed of the machine.

Sizes: ``SQLQUEUE_WORKFLOW_RACE=full`` runs the issue's 200 chords of 50 jobs; by default 50
chords of 20 (the test machine has 2 cores shared with other test runs), with 4 chains of 100.
"""

import os
from collections import defaultdict

import pytest

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.workflows import chain, chord, group
from tests.support.waiting import wait_until
from tests.testapp.models import Run
from tests.testapp.tasks import flow_step

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow,
              pytest.mark.timeout(1800)]

FULL = os.environ.get("SQLQUEUE_WORKFLOW_RACE") == "full"
CHORDS, GROUP_SIZE = (200, 50) if FULL else (50, 20)
CHAINS, CHAIN_LENGTH = 4, 100
WORKERS = 8
SETTINGS = {"POLL_INTERVAL_SECONDS": 0.2, "LEASE_SECONDS": 60}


def enqueue_workflows() -> tuple:
    """(chords as (group job ids, callback id), chains as lists of job ids)."""
    chords, chains = [], []
    for n in range(CHORDS):
        tags = [f"c{n}-{i}" for i in range(GROUP_SIZE)]
        flow = chord(group(flow_step.s(tag=tag) for tag in tags),
                     flow_step.s(tag=f"c{n}-callback", expect=[tags])).enqueue()
        chords.append(([job.pk for job in flow.jobs[:-1]], flow.jobs[-1].pk))
    for n in range(CHAINS):
        steps = [flow_step.s(tag=f"k{n}-0")]
        steps += [flow_step.s(tag=f"k{n}-{i}", expect=[f"k{n}-{i - 1}"])
                  for i in range(1, CHAIN_LENGTH)]
        chains.append([job.pk for job in chain(*steps).enqueue().jobs])
    return chords, chains


def unfinished() -> int:
    return Job.objects.exclude(status=JobStatus.SUCCEEDED).exclude(
        status__in=[JobStatus.EXHAUSTED, JobStatus.CANCELLED]).count()


def test_racing_workers_release_every_callback_once_after_its_group(start_worker):
    workers = [start_worker("-c", "4", "--no-scheduler", settings=SETTINGS)
               for _ in range(WORKERS)]
    # Every worker is up before the jobs come: all 8 race from the first claim.
    wait_until(lambda: Worker.objects.count() == WORKERS, what="8 workers to register",
               timeout=300, worker=workers)
    chords, chains = enqueue_workflows()
    total = CHORDS * (GROUP_SIZE + 1) + CHAINS * CHAIN_LENGTH
    wait_until(lambda: unfinished() == 0, what="every workflow job to finish", timeout=1500,
               interval=0.5, worker=workers,
               context=lambda: f"{unfinished()} of {total} unfinished")

    assert Job.objects.count() == total
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == total, list(
        Job.objects.exclude(status=JobStatus.SUCCEEDED).values("pk", "status", "errors")[:3])
    runs = defaultdict(list)
    for run in Run.objects.all():
        runs[run.job_id].append(run)
    assert len(runs) == total and all(len(r) == 1 for r in runs.values())  # each ran once
    for members, callback in chords:
        (callback_run,) = runs[callback]
        assert callback_run.started_at >= max(runs[pk][0].finished_at for pk in members)
    for steps in chains:
        for before, after in zip(steps, steps[1:], strict=False):
            assert runs[after][0].started_at >= runs[before][0].finished_at
    # They raced: jobs of one chord ran in several processes.
    assert max(len({runs[pk][0].pid for pk in members}) for members, _ in chords) > 1
