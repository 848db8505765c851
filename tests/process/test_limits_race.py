"""Racing worker processes never exceed a queue's or a key's limit, and a pause stops every
worker within a poll interval (issue 16).

Each job records its own start and end (tests.timed, a Run row). A job's run lies inside the
span from its claim to its outcome, so if no claim ever exceeds a limit, no instant sees more
runs at once than the limit; starts per period are checked on the claim times the database
recorded (the rate limiter's own clock).

A limit that was never reached would let the test pass with the limiter broken, so each limit
checked for "reached" is reached by construction, whatever the speed of the machine: by the
first claim of its queue, which asks for more than the limit allows (an idle worker asks for all
its slots) and, the limiter working, gets exactly the limit in one statement.
"""

import datetime as dt
import time
from collections import Counter, defaultdict

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.queues import control
from django_sqlqueue.statuses import JobStatus
from tests.support.waiting import wait_until
from tests.testapp.models import Run
from tests.testapp.tasks import timed

pytestmark = pytest.mark.django_db(transaction=True)

# Each limited queue has its own workers, each with more slots than the limit: so the first claim
# of the queue, by an idle worker asking for all its slots, reaches the limit in one statement.
# (Shared by every worker, a queue's first claims could get only the slots the worker's other
# queues left: in one CI run on a loaded machine, 19 starts of a rate of 25 per period.)
WORKERS = 4  # on "capped" and "free", 8 slots each: at most QUEUE_LIMIT of them for "capped"
QUEUE_LIMIT = 3  # "capped": running at once
KEY_WORKERS = 2
KEY_LIMIT = 2  # "keyed": running at once per key
KEYS = 6
RATE_WORKERS = 2
RATE, PERIOD = 10, 1.0  # "rated": starts per period


def most_at_once(runs) -> int:
    """The most runs in progress at any instant; an end at the very instant another starts
    does not overlap it."""
    events = sorted([(run.started_at, 1) for run in runs]
                    + [(run.finished_at, -1) for run in runs], key=lambda e: (e[0], e[1]))
    most = current = 0
    for _, step in events:
        current += step
        most = max(most, current)
    return most


def most_starts_in_a_period(times, period) -> int:
    times = sorted(times)
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= dt.timedelta(seconds=period):
            first += 1
        most = max(most, last - first + 1)
    return most


def largest_claim(queue) -> int:
    """The most jobs of ``queue`` one claim took: one claim's jobs share its worker and its
    ``claimed_at``, and were running together from then on."""
    claims = Counter(Job.objects.filter(queue=queue).values_list("claimed_by", "claimed_at"))
    return max(claims.values())


def largest_claim_per_key(queue) -> dict:
    """For each concurrency key of ``queue``, the most of its jobs one claim took."""
    claims = Counter(Job.objects.filter(queue=queue)
                     .values_list("concurrency_key", "claimed_by", "claimed_at"))
    largest = defaultdict(int)
    for (key, *_), count in claims.items():
        largest[key] = max(largest[key], count)
    return dict(largest)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_racing_workers_keep_every_limit_and_run_every_job_once(start_worker):
    control.set_limits("capped", concurrency_limit=QUEUE_LIMIT)
    control.set_limits("keyed", key_concurrency_limit=KEY_LIMIT)
    control.set_limits("rated", rate_limit=RATE, rate_period_seconds=PERIOD)
    jobs = [
        *(timed.using(queue="capped").prepare(0.005) for _ in range(300)),
        *(timed.using(queue="keyed", concurrency_key=f"k{n % KEYS}").prepare(0.005, f"k{n % KEYS}")
          for n in range(1200)),
        *(timed.using(queue="rated").prepare(0) for _ in range(6 * RATE)),
        *(timed.using(queue="free").prepare(0) for _ in range(1400)),
    ]
    Job.objects.bulk_enqueue(jobs)
    options = ("--burst", "--poll-interval", "0.2", "--no-scheduler")
    workers = [start_worker("-q", "capped", "-q", "free", "-c", "8", *options)
               for _ in range(WORKERS)]
    workers += [start_worker("-q", "keyed", "-c", str(2 * KEYS * KEY_LIMIT), *options)
                for _ in range(KEY_WORKERS)]
    workers += [start_worker("-q", "rated", "-c", str(2 * RATE), *options)
                for _ in range(RATE_WORKERS)]
    for worker in workers:
        assert worker.wait(timeout=600) == 0, worker.output

    assert Job.objects.exclude(status=JobStatus.SUCCEEDED).count() == 0
    runs = list(Run.objects.all())
    per_job = Counter(run.job_id for run in runs)
    assert len(per_job) == len(jobs) and set(per_job.values()) == {1}  # every job ran once
    queue_of = dict(Job.objects.values_list("pk", "queue"))
    by_queue = defaultdict(list)
    for run in runs:
        by_queue[queue_of[run.job_id]].append(run)
    racers = {run.worker.split(":")[0] for run in by_queue["capped"] + by_queue["free"]}
    assert len(racers) == WORKERS  # they all raced
    # Never more than the limit, and the limit reached (by construction, see above): the test
    # fails if a claim exceeds the limit, not if the machine is slow.
    assert most_at_once(by_queue["capped"]) <= QUEUE_LIMIT
    assert largest_claim("capped") == QUEUE_LIMIT
    per_key = defaultdict(list)
    for run in by_queue["keyed"]:
        per_key[run.key].append(run)
    assert all(most_at_once(r) <= KEY_LIMIT for r in per_key.values())
    assert largest_claim_per_key("keyed") == {f"k{n}": KEY_LIMIT for n in range(KEYS)}
    assert largest_claim("keyed") == KEYS * KEY_LIMIT  # keys ran side by side
    starts = Job.objects.filter(queue="rated").values_list("claimed_at", flat=True)
    assert most_starts_in_a_period(starts, PERIOD) == RATE
    assert largest_claim("rated") == RATE
    # The unlimited queue was not held: its first claims took the slots "capped" left.
    assert largest_claim("free") > QUEUE_LIMIT


def test_a_key_at_its_limit_does_not_starve_other_keys_or_queues(start_worker):
    """One key's long backlog, at its limit, in front; the other keys' jobs and another
    queue's all finish while it is still being worked through."""
    control.set_limits("keyed", key_concurrency_limit=1)
    hog = [timed.using(queue="keyed", concurrency_key="hog", priority=10).prepare(0.05, "hog")
           for _ in range(40)]
    others = [timed.using(queue="keyed", concurrency_key=f"k{n}").prepare(0.05, f"k{n}")
              for n in range(20)]
    elsewhere = [timed.using(queue="free").prepare(0.05, "free") for _ in range(40)]
    Job.objects.bulk_enqueue([*hog, *others, *elsewhere])
    workers = [start_worker("--burst", "--concurrency", "4", "--poll-interval", "0.2",
                            "--no-scheduler") for _ in range(2)]
    for worker in workers:
        assert worker.wait(timeout=300) == 0, worker.output
    runs = list(Run.objects.all())
    hog_runs = sorted((run for run in runs if run.key == "hog"), key=lambda r: r.started_at)
    last_other = max(run.finished_at for run in runs if run.key != "hog")
    assert len(hog_runs) == 40 and most_at_once(hog_runs) == 1
    # The others were done before the hog was half done (it needs 40 x 0.05 s one at a time).
    assert last_other < hog_runs[20].started_at


def test_a_paused_queue_stops_every_worker_within_a_poll_interval(start_worker):
    """Pausing while a job of the queue runs: it finishes; within one poll interval the workers
    claim nothing more of the queue, and enqueueing goes on; resumed, its jobs run."""
    poll = 0.5
    workers = [start_worker("--concurrency", "2", "--poll-interval", str(poll), "--no-scheduler")
               for _ in range(2)]
    running = timed.using(queue="emails").enqueue(2, "first")
    wait_until(lambda: Run.objects.filter(job_id=running.pk).exists(),
               what="the first job to start", worker=workers)
    control.pause("emails", by="test")
    time.sleep(poll + 0.5)  # every worker has read the pause by now
    held = [timed.using(queue="emails").enqueue(0, "held") for _ in range(5)]
    other = timed.using(queue="free").enqueue(0, "other")  # other queues keep flowing
    wait_until(lambda: Job.objects.get(pk=other.pk).status == JobStatus.SUCCEEDED,
               what="the other queue's job to succeed", worker=workers)
    wait_until(lambda: Job.objects.get(pk=running.pk).status == JobStatus.SUCCEEDED,
               what="the first job to succeed", worker=workers)
    time.sleep(poll * 2)
    assert not Run.objects.filter(key="held").exists()
    assert set(Job.objects.filter(pk__in=[j.pk for j in held]).values_list("status", flat=True)
               ) == {JobStatus.QUEUED}
    control.resume("emails")
    wait_until(lambda: Run.objects.filter(key="held", finished_at__isnull=False).count() == 5,
               what="the 5 held jobs to run once resumed", worker=workers)
    assert all(worker.is_running() for worker in workers)
