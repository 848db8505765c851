"""Periodic schedules on a real database: the sync from code, one job per tick, missed-tick
policies applied once, pause / resume / run now, daylight saving time end to end. Every test
drives the scheduler with a simulated clock (``run_once(now=...)``): no sleeps."""

import datetime as dt
import logging
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_sqlqueue import schedule
from django_sqlqueue.models import Job, Schedule
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.schedules import declared, operations
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.scheduler import Scheduler, SchedulerConfig
from tests.testapp.tasks import add, send_email, tick_seen

pytestmark = pytest.mark.django_db
UTC = dt.timezone.utc
T0 = dt.datetime(2030, 1, 1, tzinfo=UTC)
SECOND, MINUTE, HOUR = (dt.timedelta(seconds=1), dt.timedelta(minutes=1),
                        dt.timedelta(hours=1))


def scheduler(holder="w1"):
    return Scheduler(SchedulerConfig(holder=holder), alias="default")


def tick_jobs(name=None):
    jobs = Job.objects.order_by("run_at", "pk")
    return [j for j in jobs if j.schedule_name is not None and name in (None, j.schedule_name)]


@pytest.fixture
def every_minute(declared_schedules):
    schedule(every=60, name="every-minute", args=[1, 2])(add)
    operations.sync("default", now=T0)
    return Schedule.objects.get(name="every-minute")


# ---- the sync from code --------------------------------------------------------------------
def test_the_sync_creates_rows_with_the_tasks_options_resolved(declared_schedules):
    schedule(cron="0 3 * * *", timezone="Europe/Berlin", kwargs={"to": "ops@example.com"},
             priority=5)(send_email)
    schedule(every=dt.timedelta(minutes=5), name="add-often", args=[1, 2], queue="fast")(add)
    result = operations.sync("default", now=T0)
    assert result.created == ("add-often", "tests.testapp.tasks.send_email")
    nightly = Schedule.objects.get(name="tests.testapp.tasks.send_email")
    assert (nightly.task_name, nightly.cron, nightly.timezone) == (
        "tests.testapp.tasks.send_email", "0 3 * * *", "Europe/Berlin")
    assert nightly.payload == {"args": [], "kwargs": {"to": "ops@example.com"}}
    assert nightly.job_options["queue"] == "emails"  # the task's
    assert (nightly.job_options["priority"], nightly.job_options["max_attempts"]) == (5, 2)
    assert nightly.next_run_at == dt.datetime(2030, 1, 1, 2, tzinfo=UTC)  # 03:00 CET
    often = Schedule.objects.get(name="add-often")
    assert (often.every_seconds, often.job_options["queue"], often.state) == (300, "fast",
                                                                              "active")
    assert often.next_run_at == T0 + 5 * MINUTE  # the first tick after now
    assert operations.sync("default", now=T0).unchanged == 2


def test_a_schedule_gone_from_the_code_is_retired_and_revived_when_it_comes_back(
        every_minute, declared_schedules):
    saved = dict(declared_schedules)
    declared_schedules.clear()
    assert operations.sync("default", now=T0 + MINUTE).retired == ("every-minute",)
    every_minute.refresh_from_db()
    assert every_minute.state == "retired"
    assert scheduler().run_once(now=T0 + HOUR).due == 0  # a retired schedule never fires
    assert not Job.objects.exists()
    declared_schedules.update(saved)
    assert operations.sync("default", now=T0 + HOUR + 30 * SECOND).updated == ("every-minute",)
    every_minute.refresh_from_db()
    assert every_minute.state == "active"
    assert every_minute.next_run_at == T0 + 61 * MINUTE  # not the ticks it was away for


def test_a_changed_timing_starts_at_its_first_tick_and_a_pause_survives_the_deploy(
        every_minute, declared_schedules):
    operations.pause(Schedule.objects.all(), by="alice", now=T0)
    declared_schedules.clear()
    schedule(every=300, name="every-minute", args=[1, 2])(add)  # the same name, a new timing
    assert operations.sync("default", now=T0 + 2 * MINUTE).updated == ("every-minute",)
    row = Schedule.objects.get()
    assert (row.every_seconds, row.next_run_at, row.state, row.paused_by) == (
        300, T0 + 5 * MINUTE, "paused", "alice")
    assert row.version == every_minute.version + 2  # the pause, then the new definition
    assert scheduler().run_once(now=T0 + HOUR).due == 0


def test_two_schedules_of_one_task_need_names_and_bad_ones_fail_at_declaration(
        declared_schedules):
    from django.core.exceptions import ImproperlyConfigured

    from django_sqlqueue.exceptions import InvalidPeriodicSchedule

    schedule(every=60)(add)
    schedule(every=60)(add)  # the same declaration again (a module imported twice): fine
    with pytest.raises(ImproperlyConfigured, match="own name="):
        schedule(every=120)(add)
    with pytest.raises(TypeError, match="put @schedule above @job"):
        schedule(every=60)(lambda: None)
    with pytest.raises(InvalidPeriodicSchedule,
                       match="the hour field '25' is not valid: it takes 0-23"):
        schedule(cron="0 25 * * *")
    with pytest.raises(InvalidPeriodicSchedule, match="catch_up= goes with"):
        schedule(every=60, catch_up=3)
    with pytest.raises(InvalidPeriodicSchedule, match="timezone= goes with cron="):
        schedule(every=60, timezone="Europe/Berlin")
    with pytest.raises(InvalidPeriodicSchedule, match="not JSON-serialisable"):
        schedule(every=60, name="x", args=[dt.date(2030, 1, 1)])
    assert [spec.name for spec in declared()] == ["tests.testapp.tasks.add"]


# ---- one job per tick ------------------------------------------------------------------------
def test_a_due_tick_becomes_one_job_that_carries_its_schedule_and_tick(every_minute):
    assert scheduler().run_once(now=T0 + 30 * SECOND).due == 0
    result = scheduler("worker-a").run_once(now=T0 + MINUTE + 0.2 * SECOND)
    assert (result.due, result.fired, result.enqueued, result.skipped) == (1, 1, 1, 0)
    (tick_job,) = Job.objects.all()
    assert tick_job.task_name == "tests.testapp.tasks.add"
    assert tick_job.args == [1, 2] and tick_job.kwargs == {}
    assert tick_job.payload["schedule"] == {
        "name": "every-minute", "tick": "2030-01-01T00:01:00+00:00", "by": "worker-a"}
    assert (tick_job.schedule_name, tick_job.schedule_tick) == ("every-minute", T0 + MINUTE)
    assert tick_job.unique_key == "schedule:every-minute@2030-01-01T00:01:00Z"
    assert (tick_job.run_at, tick_job.status) == (T0 + MINUTE, JobStatus.QUEUED)
    row = Schedule.objects.get()
    assert (row.next_run_at, row.last_run_at, row.last_job_id, row.last_enqueued_by,
            row.runs) == (T0 + 2 * MINUTE, T0 + MINUTE, tick_job.pk, "worker-a", 1)
    assert scheduler().run_once(now=T0 + MINUTE + 0.5 * SECOND).due == 0  # handled


def test_schedulers_that_read_the_same_cursor_enqueue_the_tick_once(every_minute):
    now = T0 + MINUTE
    row = Schedule.objects.get()
    plan = operations.plan_for(row, now)
    first = operations.enqueue_ticks(row, plan, holder="a", now=now, alias="default")
    second = operations.enqueue_ticks(row, plan, holder="b", now=now, alias="default")
    assert (first.won, len(first.jobs), second.won, second.jobs) == (True, 1, False, ())
    assert Job.objects.count() == 1
    results = [scheduler(f"w{n}").run_once(now=now + MINUTE) for n in range(3)]
    assert [r.fired for r in results] == [1, 0, 0]
    assert Job.objects.count() == 2


def test_the_job_runs_with_its_tick_in_current_job(declared_schedules):
    schedule(cron="*/10 * * * *", timezone="UTC", name="tick-seen", kwargs={"label": "x"})(
        tick_seen)
    operations.sync("default", now=T0)
    scheduler().run_once(now=T0 + 10 * MINUTE)
    (claimed,) = Job.objects.claim(None, "w1", now=T0 + 10 * MINUTE)
    assert run_job(claimed).outcome == "succeeded"
    claimed.refresh_from_db()
    assert claimed.result == {"schedule": "tick-seen", "tick": "2030-01-01T00:10:00+00:00",
                              "label": "x"}


def test_max_age_makes_a_stale_tick_expire_instead_of_running(declared_schedules):
    schedule(every=60, name="fresh", missed="catch_up", catch_up=3)(add.using(max_age=30))
    operations.sync("default", now=T0)
    scheduler().run_once(now=T0 + 3 * MINUTE + 10 * SECOND)  # a backlog of three ticks
    jobs = tick_jobs("fresh")
    assert [j.expires_at - j.run_at for j in jobs] == [30 * SECOND] * 3
    assert Job.objects.ready(T0 + 3 * MINUTE + 10 * SECOND).count() == 1  # the fresh one


# ---- missed ticks ----------------------------------------------------------------------------
@pytest.mark.parametrize(("missed", "extra", "expected_ticks", "skipped"), [
    ("latest", {}, [180], 179),
    ("skip", {}, [180], 179),  # 180 is 20 s late: within the grace
    ("skip", {"grace": 10}, [], 180),
    ("catch_up", {"catch_up": 4}, [177, 178, 179, 180], 176),
])
def test_after_downtime_the_policy_is_applied_once_however_many_workers_start(
        declared_schedules, missed, extra, expected_ticks, skipped, caplog):
    schedule(every=60, name="downtime", missed=missed, **extra)(add.using(queue="default"))
    operations.sync("default", now=T0)
    now = T0 + 180 * MINUTE + 20 * SECOND  # three hours without a worker
    with caplog.at_level(logging.WARNING, logger="django_sqlqueue"):
        results = [scheduler(f"w{n}").run_once(now=now) for n in range(4)]
    assert sum(r.fired for r in results) == 1 and sum(r.skipped for r in results) == skipped
    assert [j.run_at for j in tick_jobs("downtime")] == [T0 + m * MINUTE for m in
                                                          expected_ticks]
    row = Schedule.objects.get()
    assert (row.skipped_ticks, row.next_run_at) == (skipped, T0 + 181 * MINUTE)
    assert row.last_skipped_at == T0 + (180 - len(expected_ticks) if expected_ticks else 180) \
        * MINUTE
    warning = [r.getMessage() for r in caplog.records if "missed tick" in r.getMessage()]
    assert warning == [f"schedule name=downtime skipped={skipped} missed tick(s) from "
                       f"2030-01-01T00:01:00+00:00 to {row.last_skipped_at.isoformat()} "
                       f"(missed={missed}, grace={extra.get('grace', 60)}s)"]


# ---- pause, resume, run now ----------------------------------------------------------------
def test_paused_schedules_do_not_fire_and_resume_after_now(every_minute):
    assert operations.pause(Schedule.objects.all(), by="alice", now=T0) == 1
    assert scheduler().run_once(now=T0 + 10 * MINUTE).due == 0
    assert operations.resume(Schedule.objects.all(), now=T0 + 10 * MINUTE + 5 * SECOND) == 1
    row = Schedule.objects.get()
    assert (row.state, row.next_run_at) == ("active", T0 + 11 * MINUTE)
    assert scheduler().run_once(now=T0 + 11 * MINUTE).enqueued == 1
    assert [j.run_at for j in tick_jobs()] == [T0 + 11 * MINUTE]


def test_run_now_enqueues_one_job_and_leaves_the_ticks_alone(every_minute):
    operations.pause(Schedule.objects.all(), by="alice", now=T0)
    manual = operations.run_now(Schedule.objects.get(), by="admin:alice", now=T0 + 5 * SECOND)
    assert manual.payload["schedule"] == {"name": "every-minute", "by": "admin:alice",
                                          "tick": "2030-01-01T00:00:05+00:00", "manual": True}
    assert manual.run_at == T0 + 5 * SECOND
    row = Schedule.objects.get()
    assert (row.next_run_at, row.runs, row.last_job_id) == (T0 + MINUTE, 1, manual.pk)
    row.retired_at = T0
    with pytest.raises(ValueError, match="retired"):
        operations.run_now(row, by="x")


def test_a_row_whose_definition_no_longer_parses_is_reported_and_the_others_tick(
        every_minute, declared_schedules, caplog):
    schedule(every=60, name="healthy")(tick_seen)
    operations.sync("default", now=T0)
    Schedule.objects.filter(name="every-minute").update(every_seconds=None, cron="0 99 * * *")
    step = scheduler()
    with caplog.at_level(logging.ERROR, logger="django_sqlqueue"):
        first = step.run_once(now=T0 + MINUTE)
        second = step.run_once(now=T0 + 2 * MINUTE)
    assert first.broken == second.broken == ("every-minute",)
    assert len([r for r in caplog.records if "cannot tick" in r.getMessage()]) == 1
    assert [j.schedule_name for j in tick_jobs()] == ["healthy", "healthy"]


# ---- daylight saving time, end to end --------------------------------------------------------
@pytest.mark.parametrize(("zone_name", "night", "expected"), [
    ("Europe/Berlin", dt.date(2025, 3, 30), ["03:00 CEST"]),  # 02:30 does not exist
    ("Europe/Berlin", dt.date(2025, 10, 26), ["02:30 CEST"]),  # 02:30 happens twice
    ("America/New_York", dt.date(2025, 3, 9), ["03:00 EDT"]),
    ("America/New_York", dt.date(2025, 11, 2), ["01:30 EDT"]),  # 01:30 happens twice
])
def test_a_daily_schedule_fires_once_on_the_nights_the_clocks_change(
        declared_schedules, zone_name, night, expected):
    zone = ZoneInfo(zone_name)
    time_of_day = "30 1" if expected == ["01:30 EDT"] else "30 2"
    schedule(cron=f"{time_of_day} * * *", timezone=zone_name, name="nightly")(tick_seen)
    start = dt.datetime.combine(night, dt.time(), tzinfo=zone).astimezone(UTC)
    operations.sync("default", now=start)
    step = scheduler()
    for minutes in range(0, 6 * 60, 5):  # the night, five minutes at a time
        step.run_once(now=start + minutes * MINUTE)
    fired = [j.run_at.astimezone(zone).strftime("%H:%M %Z") for j in tick_jobs("nightly")]
    assert fired == expected


def test_an_hourly_schedule_fires_twice_in_the_repeated_hour(declared_schedules):
    schedule(cron="15 * * * *", timezone="America/New_York", name="hourly")(tick_seen)
    start = dt.datetime(2025, 11, 2, 4, 0, tzinfo=UTC)  # 00:00 EDT
    operations.sync("default", now=start)
    step = scheduler()
    for minutes in range(0, 4 * 60, 5):
        step.run_once(now=start + minutes * MINUTE)
    zone = ZoneInfo("America/New_York")
    fired = [j.run_at.astimezone(zone).strftime("%H:%M %Z") for j in tick_jobs("hourly")]
    assert fired == ["00:15 EDT", "01:15 EDT", "01:15 EST", "02:15 EST"]


def test_the_scheduler_reads_the_database_clock_when_no_time_is_given(every_minute):
    db_now = operations.database_now("default")
    assert abs((db_now - dt.datetime.now(UTC)).total_seconds()) < 5
    Schedule.objects.update(next_run_at=db_now - MINUTE)
    assert scheduler().run_once().enqueued == 1
    assert connection.vendor in ("sqlite", "postgresql", "mysql")


def test_a_pass_with_nothing_due_is_one_query(every_minute):
    """Every worker makes a pass a second: with nothing due, it is the due SELECT alone, which
    compares with the database's clock itself (issue 18 counted idle workers' queries)."""
    Schedule.objects.update(next_run_at=operations.database_now("default") + HOUR)
    with CaptureQueriesContext(connection) as queries:
        assert scheduler().run_once().due == 0
    assert len(queries) == 1
