"""Schedules made at run time (schedules/runtime.py) on a real database: the same checks as
``@schedule``, clear errors for names that are taken, the sync from code leaves them alone, and
the scheduler ticks them as it ticks declared ones: one job per tick, the missed-tick policies,
nothing after a change or a deletion fenced it out. A simulated clock throughout: no sleeps."""

import datetime as dt

import pytest

from django_sqlqueue import schedule
from django_sqlqueue.exceptions import (
    InvalidPeriodicSchedule,
    InvalidQueueName,
    ScheduleDeclaredInCode,
    ScheduleExists,
    ScheduleNotFound,
)
from django_sqlqueue.models import Job, Schedule
from django_sqlqueue.schedules import operations
from django_sqlqueue.schedules.runtime import add_schedule, remove_schedule, update_schedule
from tests.integration.test_schedules import HOUR, MINUTE, SECOND, T0, UTC, scheduler
from tests.testapp.tasks import add, send_email

pytestmark = pytest.mark.django_db


def ticks(name):
    return sorted(job.schedule_tick for job in Job.objects.all() if job.schedule_name == name)


# ---- the API's checks ------------------------------------------------------------------------
def test_add_schedule_writes_a_runtime_row_like_the_sync_writes_a_declared_one(
        declared_schedules):
    row = add_schedule("nightly-mail", "tests.testapp.tasks.send_email", cron="0 3 * * *",
                       timezone="Europe/Berlin", kwargs={"to": "ops@example.com"}, priority=5,
                       now=T0)
    schedule(cron="0 3 * * *", timezone="Europe/Berlin", name="declared-mail",
             kwargs={"to": "ops@example.com"}, priority=5)(send_email)
    operations.sync("default", now=T0)
    declared_row = Schedule.objects.get(name="declared-mail")
    row.refresh_from_db()
    assert (row.source, declared_row.source) == ("runtime", "code")
    for field in operations.DEFINITION_FIELDS + ("next_run_at",):
        assert getattr(row, field) == getattr(declared_row, field), field
    assert row.next_run_at == dt.datetime(2030, 1, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize(("arguments", "error", "words"), [
    ({"task": "no.such.task", "every": 60}, InvalidPeriodicSchedule, "not registered"),
    ({"task": print, "every": 60}, InvalidPeriodicSchedule, "is not a task"),
    ({"task": add}, InvalidPeriodicSchedule, "give cron=... or every=..."),
    ({"task": add, "cron": "61 * * * *"}, InvalidPeriodicSchedule, "61"),
    ({"task": add, "every": 0}, InvalidPeriodicSchedule, "every"),
    ({"task": add, "cron": "@daily", "every": 60}, InvalidPeriodicSchedule, "cron"),
    ({"task": add, "cron": "@daily", "timezone": "Mars/Olympus"}, InvalidPeriodicSchedule,
     "Mars/Olympus"),
    ({"task": add, "every": 60, "args": [object()]}, InvalidPeriodicSchedule, "JSON"),
    ({"task": add, "every": 60, "missed": "never"}, InvalidPeriodicSchedule, "missed="),
    ({"task": add, "every": 60, "catch_up": 3}, InvalidPeriodicSchedule, "catch_up="),
    ({"task": add, "every": 60, "queue": "no spaces"}, InvalidQueueName, "queue"),
])
def test_add_schedule_refuses_what_schedule_refuses(arguments, error, words):
    with pytest.raises(error, match=words):
        add_schedule("bad", **arguments)
    assert not Schedule.objects.exists()


def test_a_bad_name_is_refused():
    with pytest.raises(InvalidPeriodicSchedule, match="1 to 150 characters"):
        add_schedule("no spaces", add, every=60)


def test_a_runtime_schedule_cannot_take_a_taken_name(declared_schedules):
    schedule(every=60, name="in-code")(add)
    with pytest.raises(ScheduleDeclaredInCode, match="declared in code"):
        add_schedule("in-code", add, every=30)  # declared, not synced yet
    operations.sync("default", now=T0)
    declared_schedules.clear()
    operations.sync("default", now=T0)  # retired: the name is still the code's
    with pytest.raises(ScheduleDeclaredInCode, match="retired: delete it in the admin"):
        add_schedule("in-code", add, every=30)
    add_schedule("mine", add, every=30, now=T0)
    with pytest.raises(ScheduleExists, match="update_schedule"):
        add_schedule("mine", add, every=10)
    with pytest.raises(ScheduleDeclaredInCode):
        update_schedule("in-code", every=10)
    with pytest.raises(ScheduleDeclaredInCode):
        remove_schedule("in-code")
    with pytest.raises(ScheduleNotFound):
        update_schedule("nobody", every=10)
    with pytest.raises(ScheduleNotFound):
        remove_schedule("nobody")


def test_update_schedule_keeps_what_it_is_not_given_and_raises_the_version():
    row = add_schedule("often", add, every=60, args=[1, 2], queue="fast", now=T0)
    updated = update_schedule("often", args=[3, 4], now=T0 + SECOND)
    assert updated.payload["args"] == [3, 4]
    assert (updated.every_seconds, updated.job_options["queue"]) == (60, "fast")
    assert updated.version == row.version + 1
    assert updated.next_run_at == row.next_run_at  # the same timing: the same cursor
    assert update_schedule("often", args=[3, 4]).version == updated.version  # no change
    timed = update_schedule("often", cron="30 * * * *", timezone="Asia/Kolkata",
                            now=T0 + HOUR)
    assert (timed.cron, timed.every_seconds, timed.timezone) == ("30 * * * *", None,
                                                                 "Asia/Kolkata")
    assert timed.next_run_at == T0 + 2 * HOUR  # :30 in Kolkata is :00 in UTC, after now
    with pytest.raises(InvalidPeriodicSchedule, match="catch_up="):
        update_schedule("often", catch_up=5)
    assert update_schedule("often", missed="catch_up").catch_up == 10
    assert Schedule.objects.get(name="often").version == timed.version + 1


# ---- the sync from code leaves run-time schedules alone ------------------------------------
def test_the_sync_never_retires_nor_overwrites_a_runtime_schedule(declared_schedules, caplog):
    mine = add_schedule("mine", add, every=60, args=[1, 2], now=T0)
    schedule(every=10, name="mine", args=[9, 9])(add)  # a deploy declares the same name
    result = operations.sync("default", now=T0)
    assert result.conflicts == ("mine",) and not (result.created or result.updated)
    assert "declared in code and was created at run time" in caplog.text
    declared_schedules.clear()
    assert operations.sync("default", now=T0).retired == ()
    row = Schedule.objects.get(name="mine")
    assert (row.source, row.state, row.every_seconds, row.payload["args"], row.version) == (
        "runtime", "active", 60, [1, 2], mine.version)


# ---- the scheduler ticks them: once per tick, the policies, fenced by changes --------------
def test_a_runtime_schedule_ticks_once_per_tick_and_never_after_its_removal():
    add_schedule("often", add, every=60, args=[1, 2], now=T0)
    for holder in ("w1", "w2"):  # two schedulers at the same instant: one job
        scheduler(holder).run_once(now=T0 + MINUTE)
    assert ticks("often") == [T0 + MINUTE]
    read = Schedule.objects.get(name="often")
    remove_schedule("often")
    plan = operations.plan_for(read, T0 + 2 * MINUTE)  # a scheduler that read it before
    fired = operations.enqueue_ticks(read, plan, holder="late", now=T0 + 2 * MINUTE,
                                     alias="default")
    assert not fired.won
    assert scheduler().run_once(now=T0 + HOUR).due == 0
    assert ticks("often") == [T0 + MINUTE]


def test_a_change_fences_out_a_scheduler_that_read_the_row_before_it():
    add_schedule("often", add, every=60, now=T0)
    read = Schedule.objects.get(name="often")
    update_schedule("often", args=[5, 6])  # the cursor stays; the version moves
    plan = operations.plan_for(read, T0 + MINUTE)
    assert not operations.enqueue_ticks(read, plan, holder="late", now=T0 + MINUTE,
                                        alias="default").won
    scheduler().run_once(now=T0 + MINUTE)
    [job] = Job.objects.all()
    assert job.payload["args"] == [5, 6]


@pytest.mark.parametrize(("missed", "expected"), [
    ("latest", [T0 + 10 * MINUTE]),
    ("skip", []),
    ("catch_up", [T0 + 8 * MINUTE, T0 + 9 * MINUTE, T0 + 10 * MINUTE]),
])
def test_the_missed_tick_policies_apply_to_runtime_schedules(missed, expected):
    add_schedule("backlog", add, every=60, missed=missed,
                 catch_up=3 if missed == "catch_up" else None, grace=1, now=T0)
    result = scheduler().run_once(now=T0 + 10 * MINUTE + 30 * SECOND)
    assert ticks("backlog") == expected
    assert result.skipped == 10 - len(expected)
