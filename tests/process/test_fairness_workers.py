"""Fair shares with real workers (issue 30): one key's backlog does not delay the others.

Key "A" has a backlog of BACKLOG ready jobs on a fair queue; keys B..K get WAVE_PER_KEY jobs
each in WAVES waves arriving while A's backlog runs. The waves are brought by A's own jobs (an
``enqueue_wave`` job every WAVE_EVERY of A's jobs), so they arrive at set points of A's
progress whatever the speed of the machine: the last one when A is less than a third done.

Then, by construction: in plain claim order every B..K job (enqueued after all of A's, at the
same priority) would be claimed after all of A's; with fair shares each key with ready jobs gets
its turn in every rotation, so the last B..K job is claimed long before half of A's backlog.
The order of claims is read from the database (``claimed_at``, by its clock when each claim
took its rows).

The claims of a fair queue run side by side, each worker process fair on its own (claim/fair.py):
racing workers on many keys run every job exactly once.
"""

import bisect
from collections import Counter

import pytest
from django.db.models import Count

from django_sqlqueue.models import Job
from django_sqlqueue.queues import control
from django_sqlqueue.statuses import JobStatus
from tests.testapp.models import Execution
from tests.testapp.tasks import add, enqueue_wave, record

pytestmark = pytest.mark.django_db(transaction=True)

BACKLOG = 10_000
WAVES, WAVE_EVERY, WAVE_PER_KEY = 10, 300, 10
KEYS = [chr(ord("B") + n) for n in range(10)]  # B..K


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_backlog_does_not_delay_other_keys_jobs_arriving_later(start_worker):
    control.set_fair("fair")
    on_a = {"queue": "fair", "concurrency_key": "A"}
    Job.objects.bulk_enqueue(
        enqueue_wave.using(**on_a).prepare(KEYS, WAVE_PER_KEY, queue="fair")
        if n % WAVE_EVERY == 0 and n // WAVE_EVERY < WAVES else add.using(**on_a).prepare(n, n)
        for n in range(BACKLOG))
    options = ("--burst", "-q", "fair", "-c", "4", "--poll-interval", "0.2", "--no-scheduler")
    workers = [start_worker(*options) for _ in range(2)]
    for worker in workers:
        assert worker.wait(timeout=800) == 0, worker.output

    others = len(KEYS) * WAVES * WAVE_PER_KEY
    assert Job.objects.filter(queue="fair", status=JobStatus.SUCCEEDED).count() == (
        BACKLOG + others)  # every job ran, A's backlog included (it took the idle share)
    # The workers raced for the same queue, and no job was claimed twice.
    assert set(Job.objects.values_list("attempts", flat=True)) == {1}
    assert Job.objects.values("claimed_by").distinct().count() == len(workers)
    # How many of A's jobs were claimed while each B..K job was ready (from its enqueue to its
    # claim): counted from its own arrival, so that a wave whose insert waited (on SQLite, for
    # the write lock the workers' claims keep taking: once 440 ms) is not held against the
    # claim. Without fair shares a job of the last wave, which arrives while A has more than
    # two thirds of its backlog left, waits for all of it.
    a_claims = sorted(Job.objects.filter(concurrency_key="A").values_list("claimed_at",
                                                                          flat=True))
    passed_by_a = max(
        bisect.bisect_right(a_claims, claimed) - bisect.bisect_right(a_claims, enqueued)
        for enqueued, claimed in Job.objects.filter(queue="fair").exclude(
            concurrency_key="A").values_list("enqueued_at", "claimed_at"))
    assert passed_by_a < BACKLOG / 2, (passed_by_a, BACKLOG)
    # Without fair shares the same jobs are claimed in plain order: all of A's first (a
    # run with set_fair("fair", False) counted 10,000 here; with it, 2,774 on SQLite, when
    # it counted A's claims before the last B..K claim).


def test_racing_workers_on_a_fair_queue_run_every_job_once_and_serve_every_key(start_worker):
    """Four worker processes claim one fair queue of 20 weighted keys side by side (no turns
    on its row): every job runs exactly once, and while every key has jobs left each gets its
    turn."""
    keys = [f"tenant-{n:02d}" for n in range(20)]
    control.set_fair("fair", weights={keys[0]: 3, keys[1]: 2})
    Job.objects.bulk_enqueue(
        record.using(queue="fair", concurrency_key=key).prepare(tag=key)
        for _ in range(60) for key in keys)  # 1,200 jobs, 60 a key
    options = ("--burst", "-q", "fair", "-c", "4", "--poll-interval", "0.2", "--no-scheduler")
    # A lease no loaded machine outlasts: a rescue's second run is not what this test is about.
    workers = [start_worker(*options, settings={"LEASE_SECONDS": 240}) for _ in range(4)]
    for worker in workers:
        assert worker.wait(timeout=280) == 0, worker.output

    jobs = Job.objects.filter(queue="fair")
    assert jobs.filter(status=JobStatus.SUCCEEDED).count() == 1_200
    # None failed, was rescued or interrupted. (A job claimed ahead that waited over a second
    # for a busy thread is given back unstarted, pool.CLAIMED_AHEAD_MAX_WAIT: its attempt
    # counter went up, with no error and no run; a loaded machine does that.)
    assert not jobs.exclude(errors=[]).exists(), list(
        jobs.exclude(errors=[]).values_list("pk", "errors")[:5])
    runs = Counter(dict(Execution.objects.values_list("job_id").annotate(n=Count("pk"))))
    assert len(runs) == 1_200 and set(runs.values()) == {1}  # each job ran once, none twice
    # The first 276 jobs claimed, in database order, hold each key's share by weight: 3 and 2
    # for the first two keys, 1 for the others, 12 jobs a share (23 shares), give or take 8:
    # each process is fair on its own claims (within a job or two a key, seen 4 at most), and
    # the cut may fall inside a claim of each. In claim order alone the first key would have
    # 14 (its jobs are enqueued in turn with the others').
    first = Counter(jobs.order_by("claimed_at", "pk").values_list("concurrency_key", flat=True)
                    [:276])
    for key in keys:
        weight = {keys[0]: 3, keys[1]: 2}.get(key, 1)
        assert abs(first[key] - 12 * weight) <= 8, (key, first[key], 12 * weight)
