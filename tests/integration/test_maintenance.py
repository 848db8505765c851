"""Maintenance, one pass at a time (run_once with an injected clock): which worker runs which
step, and purgejobs. Each step on its own: test_maintenance_steps.py."""

import datetime as dt
import io
import os

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, transaction
from django.utils import timezone

from django_sqlqueue.models import Job, Leader, Worker
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.identity import ProcessTable
from django_sqlqueue.worker.maintenance.service import Maintenance
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
DAY = dt.timedelta(days=1)
HERE = ProcessTable(boot_id="boot-1", pid_namespace=4026531836)


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def up_for_a_day(alias):
    """A server that has been up long before this process: no restart to hold rescues for."""
    return 86400.0


def maintenance(**overrides):
    # A known uptime: the real one holds every rescue while the suite's own server is younger
    # than the grace could tell apart (MariaDB's Uptime is whole seconds, read less one), as
    # when this file runs alone. The grace itself is test_outage_grace.py's.
    options = {"alias": "default", "lease_seconds": 30, "keep_succeeded": 86400,
               "keep_failed": 7 * 86400, "worker_id": "leader-1", "table": HERE,
               "server_uptime": up_for_a_day}
    return Maintenance(**{**options, **overrides})


def finished(status, at):
    job = add.enqueue(1, 1)
    Job.objects.filter(pk=job.pk).update(status=status, finished_at=at)
    return job


def _worker(name, *, pid, beat=T0, table=HERE, lease=None):
    return Worker.objects.create(name=name, host="same-host-name", pid=pid, concurrency=1,
                                 started_at=beat, last_heartbeat_at=beat,
                                 boot_id=table.boot_id, pid_namespace=table.pid_namespace,
                                 lease_seconds=lease)


def test_a_pass_expires_rescues_and_prunes():
    expiring = Job.objects.enqueue(add, (1, 1), run_at=T0, max_age=60)
    (lost,) = Job.objects.claim(None, "gone:1:x", lease=30, now=T0)
    assert lost.pk == expiring.pk
    stale_job = Job.objects.enqueue(add, (2, 2), run_at=T0, max_age=60)
    old_success = finished(JobStatus.SUCCEEDED, T0 - 2 * DAY)
    new_success = finished(JobStatus.SUCCEEDED, T0)
    old_failure = finished(JobStatus.EXHAUSTED, T0 - 8 * DAY)
    kept_failure = finished(JobStatus.EXHAUSTED, T0 - 2 * DAY)

    result = maintenance().run_once(now=T0 + dt.timedelta(minutes=5))

    assert result.leading and result.failed_steps == ()
    assert result.counts() == {"expired": 1, "reaped": 0, "rescued": 1, "pruned": 2}
    assert Job.objects.get(pk=stale_job.pk).status == JobStatus.EXPIRED
    rescued = Job.objects.get(pk=lost.pk)
    assert rescued.status == JobStatus.QUEUED and rescued.errors[0]["type"].endswith("WorkerLost")
    remaining = set(Job.objects.values_list("pk", flat=True))
    assert {old_success.pk, old_failure.pk}.isdisjoint(remaining)
    assert {new_success.pk, kept_failure.pk} <= remaining


def test_retention_none_keeps_everything():
    job = finished(JobStatus.SUCCEEDED, T0 - 400 * DAY)
    maintenance(keep_succeeded=None, keep_failed=None).run_once(now=T0)
    assert Job.objects.filter(pk=job.pk).exists()


def test_dead_workers_are_reaped_and_their_jobs_rescued_at_once():
    add.enqueue(1, 2)
    add.enqueue(3, 4)
    dead_here = _worker("dead-here", pid=2**22 + 12345)  # this table, and no such pid in it
    _worker("silent", pid=1, beat=T0 - dt.timedelta(minutes=5),  # 2+ leases
            table=ProcessTable("other-boot", 1))
    alive = _worker("alive", pid=os.getpid())
    (first,) = Job.objects.claim(None, dead_here.name, lease=300, now=T0)
    (second,) = Job.objects.claim(None, alive.name, lease=300, now=T0)

    result = maintenance().run_once(now=T0 + dt.timedelta(seconds=1))

    assert result.reaped == 2 and result.rescued == 1
    assert set(Worker.objects.values_list("name", flat=True)) == {"alive"}
    assert Job.objects.get(pk=first.pk).status == JobStatus.QUEUED  # its lease had 299 s left
    assert "is dead: its process" in Job.objects.get(pk=first.pk).errors[0]["message"]
    assert Job.objects.get(pk=second.pk).status == JobStatus.RUNNING


@pytest.mark.parametrize("table", [
    ProcessTable(HERE.boot_id, HERE.pid_namespace + 1),  # a container sharing the host name
    ProcessTable("another-boot", HERE.pid_namespace),  # the machine rebooted since
    ProcessTable(None, None),  # unknown (macOS, a row of an older version)
], ids=["other-pid-namespace", "other-boot", "unknown"])
def test_a_pid_from_another_process_table_is_never_taken_as_death(table):
    stranger = _worker("stranger", pid=2**22 + 12345, beat=T0, table=table)  # no such pid here
    add.enqueue(1, 2)
    (job,) = Job.objects.claim(None, stranger.name, lease=300, now=T0)
    result = maintenance().run_once(now=T0 + dt.timedelta(seconds=50))  # < 2 leases of silence
    assert result.reaped == 0 and Worker.objects.filter(name="stranger").exists()
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
    # Its heartbeat alone decides: silent for more than two leases, it is dead.
    assert maintenance().run_once(now=T0 + dt.timedelta(seconds=61)).reaped == 1
    assert Job.objects.get(pk=job.pk).status == JobStatus.QUEUED


def test_only_the_leader_runs_the_cluster_wide_steps_but_every_worker_reaps_its_own_table():
    later = T0 + dt.timedelta(minutes=5)
    _worker("leader-1", pid=os.getpid(), beat=later)
    _worker("leader-2", pid=os.getpid(), beat=later)
    first, second = maintenance(worker_id="leader-1"), maintenance(worker_id="leader-2")
    assert first.run_once(now=T0).leading
    Job.objects.enqueue(add, (1, 1), run_at=T0, max_age=60)
    _worker("dead-here", pid=2**22 + 12345, beat=later)

    result = second.run_once(now=later)

    assert not result.leading
    assert result.expired == 0 and result.reaped == 1  # its own table's dead pid, nothing else
    assert Job.objects.filter(status=JobStatus.QUEUED).count() == 1
    assert first.run_once(now=later).expired == 1


def test_a_clean_exit_hands_the_leadership_on_at_once():
    _worker("leader-1", pid=os.getpid(), beat=timezone.now())
    _worker("leader-2", pid=os.getpid(), beat=timezone.now())
    first, second = maintenance(worker_id="leader-1"), maintenance(worker_id="leader-2")
    assert first.run_once().leading and not second.run_once().leading
    Worker.objects.filter(name="leader-1").delete()  # what runworker does when it stops
    assert second.run_once().leading and not first.run_once().leading
    assert Leader.objects.get().holder == "leader-2"


def test_a_leader_that_stops_renewing_is_replaced_once_its_term_is_over():
    first, second = maintenance(worker_id="not-a-worker-1"), maintenance(worker_id="not-a-worker-2")
    assert first.run_once().leading
    assert not second.run_once().leading  # neither is a registered worker: the term decides
    Leader.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert second.run_once().leading
    assert not first.run_once().leading


def test_a_failing_step_is_logged_and_the_others_still_run(monkeypatch, caplog):
    lost = add.enqueue(1, 1)
    Job.objects.claim(None, "gone:1:x", lease=30, now=T0)
    cleaner = maintenance()

    def broken(*args, **kwargs):
        raise DatabaseError("canceling statement due to statement timeout")

    monkeypatch.setattr(cleaner.expirer, "run_once", broken)
    result = cleaner.run_once(now=T0 + dt.timedelta(minutes=5))
    assert result.failed_steps == ("expire",) and result.rescued == 1
    assert Job.objects.get(pk=lost.pk).status == JobStatus.QUEUED
    assert "maintenance step=expire failed (canceling statement" in caplog.text


def test_pruning_runs_at_most_every_prune_interval_unless_a_backlog_is_left():
    clock = FakeClock()
    cleaner = maintenance(clock=clock)
    finished(JobStatus.SUCCEEDED, T0 - 2 * DAY)
    assert cleaner.run_once(now=T0).pruned == 1
    finished(JobStatus.SUCCEEDED, T0 - 2 * DAY)
    clock.t += 300
    assert cleaner.run_once(now=T0).pruned == 0
    clock.t += 301
    assert cleaner.run_once(now=T0).pruned == 1


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
        output = purge("--older-than", "24h", "--status", "succeeded", "--queue", "default",
                       "--noinput")
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
