"""factory-boy factories for Job rows, and a helper that claims a job for real.

``JobFactory()`` is a queued, due job of the registered task ``tests.testapp.tasks.add`` with
payload ``{"args": [1, 2], "kwargs": {}}`` and the retry policy of the current settings, written
directly to the table (no enqueue validation), so tests can also build rows enqueue would refuse.
Traits give the other statuses: ``JobFactory(failed=True)``, ``JobFactory(succeeded=True)``...

``claimed_job()`` goes through the real path instead: ``Job.objects.enqueue`` then
``Job.objects.claim``, so the job it returns is running with a genuine claim token.
"""

import datetime as dt
import uuid

import factory
from django.utils import timezone

from django_sqlqueue.conf import get_settings
from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus

ADD_TASK = "tests.testapp.tasks.add"


def _setting(name):
    return factory.LazyFunction(lambda: getattr(get_settings(), name))


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job

    task_name = ADD_TASK
    queue = factory.LazyFunction(lambda: get_settings().DEFAULT_QUEUE)
    payload = factory.LazyFunction(lambda: {"args": [1, 2], "kwargs": {}})
    priority = 0
    status = JobStatus.QUEUED
    attempts = 0
    max_attempts = _setting("MAX_ATTEMPTS")
    retry_backoff_seconds = _setting("BACKOFF_SECONDS")
    retry_min_delay_seconds = _setting("MIN_RETRY_DELAY_SECONDS")
    retry_max_delay_seconds = _setting("MAX_RETRY_DELAY_SECONDS")
    retry_jitter = _setting("RETRY_JITTER")
    enqueued_at = factory.LazyFunction(timezone.now)
    run_at = factory.SelfAttribute("enqueued_at")
    errors = factory.LazyFunction(list)

    class Params:
        # Due in an hour, so no claim made "now" picks it.
        scheduled = factory.Trait(
            run_at=factory.LazyAttribute(lambda o: o.enqueued_at + dt.timedelta(hours=1))
        )
        # Claimed by worker "w1", lease running (no real claim: use claimed_job() for that).
        running = factory.Trait(
            status=JobStatus.RUNNING,
            attempts=1,
            claimed_by="w1",
            claimed_at=factory.SelfAttribute("run_at"),
            claim_token=factory.LazyFunction(uuid.uuid4),
            lease_expires_at=factory.LazyAttribute(lambda o: o.run_at + dt.timedelta(minutes=1)),
        )
        # The first attempt failed; waiting for its retry.
        failed = factory.Trait(
            status=JobStatus.FAILED,
            attempts=1,
            errors=factory.LazyAttribute(
                lambda o: [
                    {
                        "attempt": 1,
                        "at": o.run_at.isoformat(),
                        "type": "builtins.RuntimeError",
                        "message": "boom",
                        "traceback": "",
                        "worker": "w1",
                    }
                ]
            ),
        )
        succeeded = factory.Trait(
            status=JobStatus.SUCCEEDED,
            attempts=1,
            result=3,
            finished_at=factory.SelfAttribute("run_at"),
        )
        exhausted = factory.Trait(
            status=JobStatus.EXHAUSTED,
            attempts=factory.SelfAttribute("max_attempts"),
            finished_at=factory.SelfAttribute("run_at"),
        )
        cancelled = factory.Trait(
            status=JobStatus.CANCELLED, finished_at=factory.SelfAttribute("run_at")
        )
        # Queued, but its expires_at has passed: expire() marks it, claim() never returns it.
        stale = factory.Trait(
            expires_at=factory.LazyAttribute(lambda o: o.run_at - dt.timedelta(seconds=1))
        )
        expired = factory.Trait(
            status=JobStatus.EXPIRED,
            expires_at=factory.SelfAttribute("run_at"),
            finished_at=factory.SelfAttribute("run_at"),
        )


def claimed_job(task=ADD_TASK, args=(1, 2), kwargs=None, *, worker_id="w1", now=None,
                lease=None, **options):
    """Enqueue one job (``options`` as for ``Job.objects.enqueue``) and claim it for ``worker_id``.

    ``now`` is the claim time (default: the job's run_at or the current time, whichever is
    later). Fails loudly if the claim picks any other job, so use it with no other ready job in
    the job's queue.
    """
    job = Job.objects.enqueue(task, args, kwargs, **options)
    now = now or max(timezone.now(), job.run_at)
    claimed = Job.objects.claim([job.queue], worker_id, limit=1, lease=lease, now=now)
    if [j.pk for j in claimed] != [job.pk]:
        raise AssertionError(
            f"claimed_job: expected to claim job {job.pk}, claimed {[j.pk for j in claimed]}"
        )
    return claimed[0]


class WorkerFactory(factory.django.DjangoModelFactory):
    """A registered worker with a fresh heartbeat, as ``runworker`` writes its row."""

    class Meta:
        model = "django_sqlqueue.Worker"

    host = "web-1"
    pid = factory.Sequence(lambda n: 4000 + n)
    name = factory.LazyAttribute(lambda o: f"{o.host}:{o.pid}:a1b2c3")
    queues = factory.LazyFunction(list)
    concurrency = 4
    started_at = factory.LazyFunction(lambda: timezone.now() - dt.timedelta(hours=2))
    last_heartbeat_at = factory.LazyFunction(timezone.now)
    jobs_done = 0
