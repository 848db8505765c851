"""The cleaner, one pass at a time (run_once with an injected clock), and purgejobs."""

import datetime as dt
import io
import os

import pytest
from django.core.management import CommandError, call_command
from django.db import connections, transaction
from django.utils import timezone

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.maintenance import ADVISORY_LOCK_KEY, Maintenance
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
DAY = dt.timedelta(days=1)


def maintenance(**overrides):
    options = {"alias": "default", "lease_seconds": 30, "keep_succeeded": 86400,
               "keep_failed": 7 * 86400, "host": "this-host"}
    return Maintenance(**{**options, **overrides})


def finished(status, at):
    job = add.enqueue(1, 1)
    Job.objects.filter(pk=job.pk).update(status=status, finished_at=at)
    return job


def test_a_pass_expires_rescues_and_prunes():
    expiring = Job.objects.enqueue(add, (1, 1), run_at=T0, max_age=60)
    (lost,) = Job.objects.claim(None, "gone:1:x", lease=30, now=T0)
    assert lost.pk == expiring.pk
    stale_job = Job.objects.enqueue(add, (2, 2), run_at=T0, max_age=60)
    old_success = finished(JobStatus.SUCCEEDED, T0 - 2 * DAY)
    new_success = finished(JobStatus.SUCCEEDED, T0)
    old_failure = finished(JobStatus.EXHAUSTED, T0 - 8 * DAY)
    kept_failure = finished(JobStatus.EXHAUSTED, T0 - 2 * DAY)

    counts = maintenance().run_once(now=T0 + dt.timedelta(minutes=5))

    assert counts == {"expired": 1, "reaped": 0, "rescued": 1, "pruned": 2}
    assert Job.objects.get(pk=stale_job.pk).status == JobStatus.EXPIRED
    rescued = Job.objects.get(pk=lost.pk)
    assert rescued.status == JobStatus.FAILED and rescued.errors[0]["type"].endswith("WorkerLost")
    remaining = set(Job.objects.values_list("pk", flat=True))
    assert {old_success.pk, old_failure.pk}.isdisjoint(remaining)
    assert {new_success.pk, kept_failure.pk} <= remaining


def test_retention_none_keeps_everything():
    job = finished(JobStatus.SUCCEEDED, T0 - 400 * DAY)
    maintenance(keep_succeeded=None, keep_failed=None).run_once(now=T0)
    assert Job.objects.filter(pk=job.pk).exists()


def _worker(name, *, pid, host="this-host", beat=T0):
    return Worker.objects.create(name=name, host=host, pid=pid, concurrency=1,
                                 started_at=beat, last_heartbeat_at=beat)


def test_dead_workers_are_reaped_and_their_jobs_rescued_at_once():
    add.enqueue(1, 2)
    add.enqueue(3, 4)
    dead_here = _worker("dead-here", pid=2**22 + 12345)  # no such pid on this host
    _worker("silent", pid=1, host="elsewhere", beat=T0 - dt.timedelta(minutes=5))  # 2+ leases
    alive = _worker("alive", pid=os.getpid())
    (first,) = Job.objects.claim(None, dead_here.name, lease=300, now=T0)
    (second,) = Job.objects.claim(None, alive.name, lease=300, now=T0)

    counts = maintenance().run_once(now=T0 + dt.timedelta(seconds=1))

    assert counts["reaped"] == 2
    assert set(Worker.objects.values_list("name", flat=True)) == {"alive"}
    assert Job.objects.get(pk=first.pk).status == JobStatus.FAILED  # its lease had 299 s left
    assert "is dead: its process" in Job.objects.get(pk=first.pk).errors[0]["message"]
    assert Job.objects.get(pk=second.pk).status == JobStatus.RUNNING


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_one_worker_at_a_time_runs_maintenance():
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
        assert maintenance().run_once(now=T0) == {}  # somebody else is doing it
        other.rollback()
        assert maintenance().run_once(now=T0) != {}
    finally:
        other.close()


# ---- purgejobs ---------------------------------------------------------------------------
def purge(*args):
    out = io.StringIO()
    call_command("purgejobs", *args, stdout=out)
    return out.getvalue()


def test_purgejobs_dry_run_counts_and_deletes_nothing():
    now = timezone.now()
    finished(JobStatus.SUCCEEDED, now - 10 * DAY)
    finished(JobStatus.EXHAUSTED, now - 10 * DAY)
    finished(JobStatus.SUCCEEDED, now - DAY / 2)
    add.enqueue(1, 2)  # unfinished: never purged
    output = purge("--older-than", "7d", "--dry-run")
    assert "would delete 2 job(s)" in output and "exhausted 1, succeeded 1" in output
    assert Job.objects.count() == 4


def test_purgejobs_deletes_by_status_and_queue():
    now = timezone.now()
    gone = finished(JobStatus.SUCCEEDED, now - 2 * DAY)
    kept_status = finished(JobStatus.EXHAUSTED, now - 2 * DAY)
    kept_queue = Job.objects.enqueue(add, (1, 1), queue="other")
    Job.objects.filter(pk=kept_queue.pk).update(status="succeeded", finished_at=now - 2 * DAY)
    with transaction.atomic():
        output = purge("--older-than", "24h", "--status", "succeeded", "--queue", "default")
    assert "deleted 1 job(s)" in output
    assert not Job.objects.filter(pk=gone.pk).exists()
    assert Job.objects.filter(pk__in=[kept_status.pk, kept_queue.pk]).count() == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["--older-than", "soon"], "is not a duration"),
        (["--older-than", "7d", "--status", "queued"], "only finished jobs can be purged"),
        (["--older-than", "7d", "--queue", "no spaces"], "invalid queue name"),
    ],
)
def test_purgejobs_refuses_bad_options(args, message):
    finished(JobStatus.SUCCEEDED, timezone.now() - 30 * DAY)
    with pytest.raises(CommandError, match=message):
        purge(*args)
    assert Job.objects.count() == 1


def test_pruning_runs_at_most_every_ten_minutes():
    cleaner = maintenance()
    finished(JobStatus.SUCCEEDED, T0 - 2 * DAY)
    assert cleaner.run_once(now=T0)["pruned"] == 1
    finished(JobStatus.SUCCEEDED, T0 - 2 * DAY)
    assert cleaner.run_once(now=T0 + dt.timedelta(minutes=5))["pruned"] == 0
    assert cleaner.run_once(now=T0 + dt.timedelta(minutes=11))["pruned"] == 1
