"""Each maintenance step on its own, through its run_once(): leader, expirer, rescuer, reaper,
cleaner. On both databases, by the database's clock unless a test injects ``now``."""

import datetime as dt
import os
import time

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_sqlqueue.db.clock import DatabaseNow
from django_sqlqueue.models import Job, Leader, Worker
from django_sqlqueue.run import outcomes
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.transitions import changes
from django_sqlqueue.worker.identity import ProcessTable
from django_sqlqueue.worker.maintenance.cleaner import Cleaner, CleanerConfig
from django_sqlqueue.worker.maintenance.expirer import Expirer, ExpirerConfig
from django_sqlqueue.worker.maintenance.leader import Leader as LeaderStep
from django_sqlqueue.worker.maintenance.leader import LeaderConfig
from django_sqlqueue.worker.maintenance.reaper import Reaper, ReaperConfig
from django_sqlqueue.worker.maintenance.rescuer import Rescuer, RescuerConfig
from django_sqlqueue.worker.maintenance.service import Maintenance
from tests.support.waiting import wait_until
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
DAY = dt.timedelta(days=1)
HERE = ProcessTable(boot_id="boot-1", pid_namespace=4026531836)


def finished(status, at):
    job = add.enqueue(1, 1)
    Job.objects.filter(pk=job.pk).update(status=status, finished_at=at)
    return job


def claimed(n, *, worker="w:1:x", lease=30, now=T0, **options):
    for _ in range(n):
        Job.objects.enqueue(add, (1, 1), run_at=now, **options)
    return Job.objects.claim(None, worker, limit=n, lease=lease, now=now)


# ---- leader ------------------------------------------------------------------------------
def test_the_leader_is_elected_renews_its_term_and_keeps_its_reign():
    one = LeaderStep(LeaderConfig(holder="one"), alias="default")
    two = LeaderStep(LeaderConfig(holder="two"), alias="default")
    assert one.run_once().leading and one.run_once().changed is False
    elected_at, first_term = Leader.objects.values_list("elected_at", "expires_at").get()
    time.sleep(0.01)
    assert one.run_once().leading
    row = Leader.objects.get()
    assert (row.holder, row.elected_at) == ("one", elected_at) and row.expires_at > first_term
    assert row.expires_at - row.elected_at >= dt.timedelta(seconds=15)  # 3 x 5 s, by default
    assert two.run_once() == type(two.run_once())(leading=False, changed=False)


def test_a_term_that_ran_out_by_the_database_clock_is_taken_over():
    one = LeaderStep(LeaderConfig(holder="one", term_seconds=0.05), alias="default")
    two = LeaderStep(LeaderConfig(holder="two"), alias="default")
    assert one.run_once().leading and not two.run_once().leading
    time.sleep(0.1)
    assert two.run_once().leading
    assert not one.run_once().leading and one.keep() is False
    assert two.resign() and not Leader.objects.exists()


def test_keep_renews_during_long_steps_only_once_a_third_of_the_term_has_passed():
    now = [0.0]
    one = LeaderStep(LeaderConfig(holder="one", term_seconds=9), alias="default",
                     clock=lambda: now[0])
    one.run_once()
    with CaptureQueriesContext(connections["default"]) as queries_run:
        now[0] = 2.9
        assert one.keep()
        now[0] = 3.0
        assert one.keep()
    assert len(queries_run) == 1  # the renewal at 3 s


# ---- expirer -----------------------------------------------------------------------------
def test_the_expirer_works_in_batches_and_leaves_claimed_and_unexpired_jobs():
    for _ in range(5):
        Job.objects.enqueue(add, (1, 1), run_at=T0, max_age=60)
    (running,) = claimed(1, now=T0, max_age=60)
    later = Job.objects.enqueue(add, (1, 1), run_at=T0 + DAY, max_age=60)

    result = Expirer(ExpirerConfig(batch_size=2), alias="default").run_once(
        now=T0 + dt.timedelta(minutes=5))

    assert (result.expired, result.batches) == (5, 3)
    assert Job.objects.filter(status=JobStatus.EXPIRED).count() == 5
    assert Job.objects.get(pk=running.pk).status == JobStatus.RUNNING
    assert Job.objects.get(pk=later.pk).status == JobStatus.QUEUED


def test_expire_without_now_uses_the_database_clock():
    job = Job.objects.enqueue(add, (1, 1), max_age=0.05)
    time.sleep(0.1)
    assert Job.objects.expire(limit=10) == 1
    job.refresh_from_db()
    assert job.status == JobStatus.EXPIRED and job.finished_at >= job.expires_at


# ---- rescuer -----------------------------------------------------------------------------
def test_the_rescuer_gives_back_every_lost_job_in_batches_with_an_interruption_entry():
    jobs = claimed(5, max_attempts=1)  # their one attempt is given back: a loss is no failure
    last_interruption = claimed(1, max_interruptions=1)[0]
    renewed = claimed(1)[0]
    Job.objects.extend_leases(renewed.claimed_by, [renewed.pk], lease=3600, now=T0)
    Job.objects.filter(pk=jobs[0].pk).update(errors=[{"attempt": 0, "type": "earlier"}])
    now = T0 + dt.timedelta(minutes=5)

    result = Rescuer(RescuerConfig(batch_size=2), alias="default").run_once(now=now)

    assert (result.rescued, result.batches) == (6, 4)
    for job in Job.objects.filter(pk__in=[j.pk for j in jobs]):
        assert (job.status, job.run_at, job.lease_expires_at) == (JobStatus.QUEUED, now, None)
        assert job.finished_at is None
        assert (job.attempts, job.max_attempts, job.interruptions) == (1, 2, 1)
        entry = job.errors[-1]
        assert entry == {
            "attempt": 1, "at": entry["at"], "type": "django_sqlqueue.run.outcomes.WorkerLost",
            "message": "worker w:1:x was lost while running attempt 1 (its lease expired); "
                       "interruption 1 of 3: the job runs again, the attempt not counted.",
            "traceback": "", "worker": "w:1:x", "interrupted": True,
        }
        assert dt.datetime.fromisoformat(entry["at"]) == now
    assert Job.objects.get(pk=jobs[0].pk).errors[0] == {"attempt": 0, "type": "earlier"}
    exhausted = Job.objects.get(pk=last_interruption.pk)
    assert (exhausted.status, exhausted.finished_at) == (JobStatus.EXHAUSTED, now)
    assert exhausted.interruptions == 1 and exhausted.errors[-1]["message"].endswith(
        "interruption 1 of 1: not run again (max_interruptions), as the job may be what stops "
        "its workers.")
    assert Job.objects.get(pk=renewed.pk).status == JobStatus.RUNNING  # its lease was renewed


def test_the_worker_lost_type_is_the_exception_class():
    lost = outcomes.WorkerLost
    assert changes.WORKER_LOST_TYPE == f"{lost.__module__}.{lost.__qualname__}"


def test_rescue_without_now_uses_the_database_clock():
    add.enqueue(1, 1)
    # A 2 s lease: 50 ms ran out before the next query on busy shared cores.
    (job,) = Job.objects.claim(None, "w:1:x", lease=2)
    assert Job.objects.lease_expired().count() == 0
    wait_until(lambda: Job.objects.lease_expired().exists(),  # by the database's clock
               what="the 2 s lease to run out", timeout=60, interval=0.1)
    assert Job.objects.lease_expired().rescue() == 1
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and job.run_at > job.claimed_at
    assert dt.datetime.fromisoformat(job.errors[0]["at"]) - job.run_at < dt.timedelta(
        milliseconds=1)


def test_rescue_takes_any_running_job_of_the_queryset_and_a_reason():
    (job,) = claimed(1, lease=3600)
    assert Job.objects.filter(claimed_by="w:1:x").rescue(reason="host retired", now=T0) == 1
    message = Job.objects.get(pk=job.pk).errors[0]["message"]
    assert message == ("worker w:1:x was lost while running attempt 1 (host retired); "
                       "interruption 1 of 3: the job runs again, the attempt not counted.")


def test_a_running_row_without_claim_or_lease_is_rescued():
    job = add.enqueue(1, 1)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, attempts=1)
    assert Job.objects.lease_expired(T0).rescue(T0) == 1
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED
    assert job.errors[0]["message"].startswith("worker ? was lost") and job.errors[0][
        "worker"] == ""


def test_rescuing_one_job_is_fenced_on_the_lease_as_read():
    (job,) = claimed(1)
    stale = Job.objects.get(pk=job.pk)
    Job.objects.extend_leases(job.claimed_by, [job.pk], lease=3600, now=T0)  # a heartbeat
    assert outcomes.rescue(stale, now=T0 + dt.timedelta(minutes=5)) is False
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
    fresh = Job.objects.get(pk=job.pk)
    assert outcomes.rescue(fresh, now=T0 + DAY) is True
    assert fresh.status == JobStatus.QUEUED and fresh.errors[0]["type"].endswith("WorkerLost")


def test_a_long_message_is_cut_to_max_traceback_chars(settings):
    settings.SQLQUEUE = {**settings.SQLQUEUE, "MAX_TRACEBACK_CHARS": 40}
    (job,) = claimed(1)
    Job.objects.filter(pk=job.pk).rescue(T0, reason="x" * 100)
    assert len(Job.objects.get(pk=job.pk).errors[0]["message"]) == 40


# ---- reaper ------------------------------------------------------------------------------
def _worker(name, *, pid=2**22 + 12345, beat=T0, table=HERE, lease=None):
    return Worker.objects.create(name=name, host="h", pid=pid, concurrency=1, started_at=beat,
                                 last_heartbeat_at=beat, boot_id=table.boot_id,
                                 pid_namespace=table.pid_namespace, lease_seconds=lease)


def test_silence_is_judged_by_each_workers_own_lease():
    _worker("long-lease", lease=300, table=ProcessTable(None, None))
    _worker("short-lease", lease=30, table=ProcessTable(None, None))
    _worker("no-lease-recorded", table=ProcessTable(None, None))  # the reaper's own: 30 s
    result = Reaper(ReaperConfig(lease_seconds=30), alias="default", table=HERE).run_once(
        now=T0 + dt.timedelta(seconds=100))
    assert {r.worker for r in result.reaped} == {"short-lease", "no-lease-recorded"}
    assert {r.reason for r in result.reaped} == {"it stopped sending heartbeats"}


def test_silence_is_judged_by_the_database_clock():
    now = timezone.now()
    _worker("quiet", beat=now - dt.timedelta(seconds=61), table=ProcessTable(None, None))
    _worker("fresh", beat=now, table=ProcessTable(None, None))
    result = Reaper(alias="default", table=HERE).run_once()
    assert [r.worker for r in result.reaped] == ["quiet"]


def test_without_silent_only_dead_pids_of_this_process_table_are_reaped():
    _worker("dead-here")
    _worker("dead-elsewhere", table=ProcessTable(HERE.boot_id, 1))
    _worker("silent-elsewhere", beat=T0 - DAY, table=ProcessTable("b2", 1))
    _worker("me", pid=os.getpid())
    result = Reaper(alias="default", table=HERE).run_once(now=T0, silent=False)
    assert [(r.worker, r.reason) for r in result.reaped] == [
        ("dead-here", f"its process {2**22 + 12345} no longer exists")]


def test_a_worker_that_beats_while_being_judged_is_not_reaped():
    row = _worker("late", beat=timezone.now() - dt.timedelta(seconds=1))

    def dead_but_beats_meanwhile(pid):
        Worker.objects.filter(pk=row.pk).update(last_heartbeat_at=DatabaseNow())
        return False

    reaper = Reaper(alias="default", table=HERE, pid_alive=dead_but_beats_meanwhile)
    assert reaper.run_once(silent=False).reaped == ()
    assert Worker.objects.filter(pk=row.pk).exists()


# ---- cleaner -----------------------------------------------------------------------------
def test_the_cleaner_deletes_past_retention_in_batches_and_keeps_the_rest():
    old = [finished(JobStatus.SUCCEEDED, T0 - 2 * DAY) for _ in range(5)]
    old += [finished(status, T0 - 8 * DAY) for status in
            (JobStatus.EXHAUSTED, JobStatus.CANCELLED, JobStatus.EXPIRED)]
    kept = [finished(JobStatus.SUCCEEDED, T0 - DAY / 2),
            finished(JobStatus.EXHAUSTED, T0 - 2 * DAY), add.enqueue(1, 1)]
    config = CleanerConfig(keep_succeeded_seconds=86400, keep_failed_seconds=7 * 86400,
                           batch_size=3)

    result = Cleaner(config, alias="default").run_once(now=T0)

    assert (result.deleted, result.batches, result.done) == (8, 3, True)
    assert set(Job.objects.values_list("pk", flat=True)) == {job.pk for job in kept}
    assert not Job.objects.filter(pk__in=[job.pk for job in old]).exists()


def test_a_run_stops_after_run_seconds_and_the_next_goes_on_from_there():
    for _ in range(7):
        finished(JobStatus.SUCCEEDED, T0 - 2 * DAY)
    now = [0.0]

    def tick():
        now[0] += 1
        return now[0]

    config = CleanerConfig(keep_succeeded_seconds=86400, batch_size=2, run_seconds=0.5,
                           interval_seconds=600)
    cleaner = Cleaner(config, alias="default", clock=tick)
    first = cleaner.run_once(now=T0)
    assert (first.deleted, first.done) == (2, False) and cleaner.is_due()
    rest = [cleaner.run_once(now=T0) for _ in range(3)]
    assert [r.deleted for r in rest] == [2, 2, 1] and rest[-1].done
    assert not Job.objects.exists() and not cleaner.is_due()


def test_a_backlog_is_deleted_with_pauses_as_long_as_its_batches_and_fresh_rows_without():
    """Rows past their retention by more than backlog_after_seconds get, after each batch, a
    pause backlog_pause_ratio times the batch's time; rows just past it the fixed pause_seconds
    (which also bounds a backlog's pause from below)."""
    for _ in range(4):
        finished(JobStatus.SUCCEEDED, T0 - 3 * DAY)  # two days past a day's retention
    fresh = [finished(JobStatus.SUCCEEDED, T0 - DAY - dt.timedelta(minutes=5))
             for _ in range(5)]
    clock, pauses = [0.0], []

    def tick():  # each batch takes 1 "second"
        clock[0] += 1
        return clock[0]

    config = CleanerConfig(keep_succeeded_seconds=86400, batch_size=2, run_seconds=1000,
                           pause_seconds=0.5, backlog_after_seconds=3600, backlog_pause_ratio=3)
    cleaner = Cleaner(config, alias="default", clock=tick, sleep=pauses.append)
    backlog = cleaner.run_once(now=T0)
    assert backlog.deleted == 9  # one run: the backlog's four rows, then the fresh ones
    assert pauses == [3.0] * 4  # the run began on the backlog: a pause between its batches

    for _ in range(5):
        finished(JobStatus.SUCCEEDED, T0 - DAY - dt.timedelta(minutes=5))
    pauses.clear()
    steady = Cleaner(config, alias="default", clock=tick, sleep=pauses.append).run_once(now=T0)
    assert steady.deleted == 5 and pauses == [0.5] * 2
    assert not Job.objects.filter(pk__in=[job.pk for job in fresh]).exists()


def test_with_a_long_prune_interval_a_backlog_starts_two_intervals_past_the_retention():
    """A sweep an interval apart starts on rows up to an interval past their retention: with a
    prune interval longer than backlog_after_seconds, that is still keeping up."""
    for _ in range(3):
        finished(JobStatus.SUCCEEDED, T0 - DAY - dt.timedelta(hours=3))
    pauses = []
    config = CleanerConfig(keep_succeeded_seconds=86400, batch_size=2, backlog_after_seconds=60,
                           interval_seconds=2 * 3600, pause_seconds=0, backlog_pause_ratio=1)
    assert Cleaner(config, alias="default", sleep=pauses.append).run_once(now=T0).deleted == 3
    assert pauses == []  # 3 hours behind: under two intervals of 2 hours, no pause

    for _ in range(3):
        finished(JobStatus.SUCCEEDED, T0 - DAY - dt.timedelta(hours=5))
    assert Cleaner(config, alias="default", sleep=pauses.append).run_once(now=T0).deleted == 3
    assert len(pauses) == 1  # 5 hours behind: a backlog, a pause between its two batches


def test_prune_without_now_uses_the_database_clock():
    gone = finished(JobStatus.SUCCEEDED, timezone.now() - dt.timedelta(seconds=120))
    kept = finished(JobStatus.SUCCEEDED, timezone.now() + dt.timedelta(seconds=120))
    assert Job.objects.prune(keep_succeeded=60) == 1
    assert list(Job.objects.values_list("pk", flat=True)) == [kept.pk] != [gone.pk]


@pytest.mark.django_db(transaction=True)
def test_every_batch_is_committed_on_its_own():
    for _ in range(7):
        finished(JobStatus.SUCCEEDED, T0 - 2 * DAY)
    seen = []
    other = connections.create_connection("default")
    try:
        def count_from_another_connection():
            with other.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM django_sqlqueue_job")
                seen.append(cursor.fetchone()[0])
            return True

        config = CleanerConfig(keep_succeeded_seconds=86400, batch_size=2)
        Cleaner(config, alias="default").run_once(now=T0, keep_going=count_from_another_connection)
    finally:
        other.close()
    assert seen == [5, 3, 1]  # each batch visible to others as soon as it is done


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_each_batch_gets_its_statement_timeout_and_a_batch_over_it_fails_its_step_alone(caplog):
    jobs = [finished(JobStatus.SUCCEEDED, T0 - 2 * DAY) for _ in range(5)]
    config = CleanerConfig(keep_succeeded_seconds=86400, batch_size=2,
                           statement_timeout_seconds=0.2)
    with CaptureQueriesContext(connections["default"]) as run:
        Cleaner(config, alias="default").run_once(now=T0)
    assert sum("statement_timeout" in q["sql"] for q in run.captured_queries) == 3
    assert [q["sql"] for q in run.captured_queries if "statement_timeout" in q["sql"]][0] == (
        "SELECT set_config('statement_timeout', '200', true)")

    for _ in range(3):
        finished(JobStatus.SUCCEEDED, T0 - 2 * DAY)
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:  # a lock the DELETE would wait for
            cursor.execute("SELECT id FROM django_sqlqueue_job ORDER BY id LIMIT 1 FOR UPDATE")
        maintenance = Maintenance(alias="default", lease_seconds=30, keep_succeeded=86400,
                                  keep_failed=None, worker_id="m", table=HERE)
        maintenance.cleaner = Cleaner(config, alias="default")
        started = time.monotonic()
        result = maintenance.run_once(now=T0)
        # Without the statement timeout the DELETE would wait for the lock until the end of
        # the test: any bound proves the timeout; 30 s, as 2 s failed on busy shared cores.
        assert time.monotonic() - started < 30
        assert result.failed_steps == ("prune",) and result.leading
        assert "canceling statement due to statement timeout" in caplog.text
        other.rollback()
    finally:
        other.close()
    with connections["default"].cursor() as cursor:  # the timeout was local to the batch
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"
    assert Cleaner(config, alias="default").run_once(now=T0).deleted == 3
    assert not Job.objects.filter(pk__in=[j.pk for j in jobs]).exists()


@pytest.mark.postgresql
@pytest.mark.parametrize("queryset, index", [
    (lambda: Job.objects.expire(limit=1000), "sqlqueue_job_expiring"),
    (lambda: Job.objects.lease_expired().rescue(limit=1000), "sqlqueue_job_leases"),
], ids=["expire", "rescue"])
def test_the_expirer_and_the_rescuer_can_use_their_partial_indexes(queryset, index):
    """By the database's clock too: a "now" that is stable within the statement lets PostgreSQL
    prove the partial index's predicate (with the sequential scan off, so size does not matter)."""
    connection = connections["default"]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    with CaptureQueriesContext(connection) as run:
        queryset()
    statement = next(q["sql"] for q in run.captured_queries
                     if q["sql"].startswith(("UPDATE", "WITH")))
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {statement}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert index in plan, plan
