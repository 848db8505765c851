"""When ticks fall: cron in a time zone (daylight saving time in two zones), intervals, and the
missed-tick policies (tick_plan.plan). Pure functions: no database."""

import datetime as dt
import itertools
import re
from zoneinfo import ZoneInfo

import pytest

from django_sqlqueue.exceptions import InvalidPeriodicSchedule
from django_sqlqueue.ticks import tick_plan
from django_sqlqueue.ticks.timetables import (
    CronTimetable,
    IntervalTimetable,
    next_ticks,
    ticks_from,
    timetable,
)

UTC = dt.timezone.utc
NEW_YORK, BERLIN = ZoneInfo("America/New_York"), ZoneInfo("Europe/Berlin")
# 2025: New York springs forward on March 9 (02:00 EST -> 03:00 EDT) and falls back on
# November 2 (02:00 EDT -> 01:00 EST); Berlin on March 30 (02:00 CET -> 03:00 CEST) and
# October 26 (03:00 CEST -> 02:00 CET). Each: (spring day, autumn day, a local time that does
# not exist in spring, one that happens twice in autumn).
TRANSITIONS = {
    "America/New_York": (dt.date(2025, 3, 9), dt.date(2025, 11, 2), "02:30", "01:30"),
    "Europe/Berlin": (dt.date(2025, 3, 30), dt.date(2025, 10, 26), "02:30", "02:30"),
}


def local_day_ticks(table, zone, day):
    """The ticks whose local date is ``day``, as local datetimes."""
    start = dt.datetime.combine(day, dt.time(), tzinfo=zone).astimezone(UTC)
    end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=zone).astimezone(UTC)
    ticks = itertools.takewhile(lambda t: t < end, ticks_from(table, start))
    return [tick.astimezone(zone) for tick in ticks]


def clock(ticks):
    return [f"{t:%H:%M %Z}" for t in ticks]


# ---- daylight saving time, in two zones ----------------------------------------------------
@pytest.mark.parametrize("zone_name", TRANSITIONS)
def test_a_time_in_the_spring_gap_runs_once_at_the_first_minute_after_it(zone_name):
    zone = ZoneInfo(zone_name)
    spring = TRANSITIONS[zone_name][0]
    table = CronTimetable("30 2 * * *", zone_name)  # 02:30 does not exist that night
    assert len(local_day_ticks(table, zone, spring)) == 1
    (tick,) = local_day_ticks(table, zone, spring)
    assert tick.strftime("%H:%M") == "03:00"
    for day in (spring - dt.timedelta(days=1), spring + dt.timedelta(days=1)):
        assert [t.strftime("%H:%M") for t in local_day_ticks(table, zone, day)] == ["02:30"]


@pytest.mark.parametrize("zone_name", TRANSITIONS)
def test_a_repeated_time_in_the_autumn_runs_once_at_its_first_occurrence(zone_name):
    zone = ZoneInfo(zone_name)
    autumn, repeated = TRANSITIONS[zone_name][1], TRANSITIONS[zone_name][3]
    hour, minute = repeated.split(":")
    table = CronTimetable(f"{int(minute)} {int(hour)} * * *", zone_name)
    ticks = local_day_ticks(table, zone, autumn)
    assert len(ticks) == 1
    assert ticks[0].strftime("%H:%M") == repeated and ticks[0].fold == 0  # summer time
    assert ticks[0].dst()


@pytest.mark.parametrize("zone_name", TRANSITIONS)
def test_hourly_expressions_follow_real_time_23_and_25_runs(zone_name):
    zone = ZoneInfo(zone_name)
    spring, autumn, *_ = TRANSITIONS[zone_name]
    table = CronTimetable("15 * * * *", zone_name)
    assert len(local_day_ticks(table, zone, spring)) == 23
    autumn_ticks = local_day_ticks(table, zone, autumn)
    assert len(autumn_ticks) == 25
    utc = [tick.astimezone(UTC) for tick in autumn_ticks]
    gaps = {b - a for a, b in itertools.pairwise(utc)}
    assert gaps == {dt.timedelta(hours=1)}  # in real time, every hour, twice at the repeat


def test_every_15_minutes_skips_the_missing_local_times_and_repeats_the_doubled_ones():
    table = CronTimetable("*/15 * * * *", "America/New_York")
    spring = local_day_ticks(table, NEW_YORK, dt.date(2025, 3, 9))
    assert clock(spring[6:10]) == ["01:30 EST", "01:45 EST", "03:00 EDT", "03:15 EDT"]
    assert len(spring) == 92
    autumn = local_day_ticks(table, NEW_YORK, dt.date(2025, 11, 2))
    assert clock(autumn[4:13]) == [
        "01:00 EDT", "01:15 EDT", "01:30 EDT", "01:45 EDT",
        "01:00 EST", "01:15 EST", "01:30 EST", "01:45 EST", "02:00 EST",
    ]
    assert len(autumn) == 100


def test_a_fixed_time_outside_the_transition_keeps_its_local_time_across_it():
    table = CronTimetable("0 9 * * 1-5", "Europe/Berlin")  # 09:00 on weekdays
    ticks = next_ticks(table, dt.datetime(2025, 3, 27, tzinfo=UTC), 3)
    assert [t.astimezone(BERLIN).strftime("%a %H:%M %Z") for t in ticks] == [
        "Thu 09:00 CET", "Fri 09:00 CET", "Mon 09:00 CEST"]
    assert [t.strftime("%H:%M") for t in ticks] == ["08:00", "08:00", "07:00"]  # in UTC


def test_intervals_count_real_seconds_through_daylight_saving_time():
    table = IntervalTimetable(3600)
    spring = local_day_ticks(table, BERLIN, dt.date(2025, 3, 30))
    autumn = local_day_ticks(table, BERLIN, dt.date(2025, 10, 26))
    assert (len(spring), len(autumn)) == (23, 25)


@pytest.mark.parametrize("zone_name", [*TRANSITIONS, "Australia/Lord_Howe", "UTC"])
@pytest.mark.parametrize("expression", [
    "30 2 * * *", "0 2 * * *", "*/15 * * * *", "15 * * * *", "30 1 * * *", "0 1-3 * * *",
    "0 2,3 * * *", "*/7 2 * * *", "0 */2 * * *", "45 2 25-31 3,10 *",
])
def test_starting_again_from_any_tick_gives_the_same_ticks(zone_name, expression):
    """What lets any process take over from the cursor another one left: the ticks after a tick
    do not depend on where the walk began, through every DST change of the year."""
    table = CronTimetable(expression, zone_name)
    # Around each change of 2025: New York (March 9, November 2), Berlin (March 30, October
    # 26), Lord Howe (half an hour, April 6 and October 5).
    for start in (dt.datetime(2025, 3, 8, tzinfo=UTC), dt.datetime(2025, 3, 29, tzinfo=UTC),
                  dt.datetime(2025, 4, 5, tzinfo=UTC), dt.datetime(2025, 10, 4, tzinfo=UTC),
                  dt.datetime(2025, 10, 25, tzinfo=UTC), dt.datetime(2025, 11, 1, tzinfo=UTC)):
        walked = list(itertools.islice(table.ticks_after(start), 200))
        stepped = [next(table.ticks_after(start))]
        while len(stepped) < len(walked):
            stepped.append(next(table.ticks_after(stepped[-1])))
        assert stepped == walked
        assert [next(ticks_from(table, tick)) for tick in walked] == walked
        assert walked == sorted(set(walked))


# ---- parsing ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("alias", "fields"), [
    ("@hourly", "0 * * * *"), ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"),
    ("@weekly", "0 0 * * 0"), ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"), ("@DAILY", "0 0 * * *"),
])
def test_cron_aliases(alias, fields):
    table = CronTimetable(alias, "UTC")
    assert table.fields == fields
    start = dt.datetime(2026, 5, 17, 10, 30, tzinfo=UTC)
    assert next_ticks(table, start, 3) == next_ticks(CronTimetable(fields, "UTC"), start, 3)


@pytest.mark.parametrize(("expression", "message"), [
    ("* * * *", "has 4 fields"),
    ("0 0 * * * *", "has 6 fields: write five"),
    ("61 * * * *", "cron '61 * * * *': the minute field '61' is not valid: it takes 0-59, a "
                   "range (a-b), a list (a,b), a step (*/n) or *."),
    ("0 0 * 13 *", "the month field '13' is not valid: it takes 1-12 or jan-dec, a range"),
    ("0 0 * * mon-", "the day-of-week field 'mon-' is not valid: it takes 0-7 (0 and 7 are "
                     "Sunday) or sun-sat, a range"),
    ("@reboot", "unknown alias"),
    ("0 0 30 2 *", "cron '0 0 30 2 *': day-of-month '30' is in none of the months '2'."),
    ("0 0 32 * *", "the day-of-month field '32' is not valid: it takes 1-31"),
])
def test_invalid_cron_expressions_are_refused_with_the_reason(expression, message):
    with pytest.raises(InvalidPeriodicSchedule, match=re.escape(message)):
        CronTimetable(expression, "UTC")


def test_invalid_time_zones_and_intervals_are_refused():
    with pytest.raises(InvalidPeriodicSchedule, match="not in the IANA database"):
        CronTimetable("0 3 * * *", "Mars/Olympus_Mons")
    for every in (0, -5, 1.5, True, "60", dt.timedelta(milliseconds=500)):
        with pytest.raises(InvalidPeriodicSchedule, match="whole number of seconds"):
            IntervalTimetable(every)
    with pytest.raises(InvalidPeriodicSchedule, match="exactly one of cron= and every="):
        timetable(cron="0 3 * * *", every=60)


def test_intervals_are_aligned_to_the_epoch_and_described_in_words():
    table = IntervalTimetable(dt.timedelta(minutes=5))
    after = dt.datetime(2026, 1, 31, 10, 2, 30, 123, tzinfo=UTC)
    assert [t.strftime("%H:%M:%S") for t in next_ticks(table, after, 3)] == [
        "10:05:00", "10:10:00", "10:15:00"]
    assert next(ticks_from(table, dt.datetime(2026, 1, 31, 10, 5, tzinfo=UTC))).minute == 5
    assert [IntervalTimetable(s).describe() for s in (1, 2, 60, 300, 3600, 86400, 90)] == [
        "Every second", "Every 2 seconds", "Every minute", "Every 5 minutes", "Every hour",
        "Every day", "Every 90 seconds"]
    assert CronTimetable("0 3 * * *", "UTC").describe() == "At 03:00 every day (0 3 * * *)"
    assert CronTimetable("@hourly", "UTC").describe() == "At the start of every hour (@hourly)"


# ---- the missed-tick policies --------------------------------------------------------------
T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = dt.timedelta(minutes=1)
EVERY_MINUTE = IntervalTimetable(60)


def at(minutes, seconds=0):
    return T0 + minutes * MINUTE + dt.timedelta(seconds=seconds)


def test_one_due_tick_on_time_is_enqueued_and_the_cursor_moves_past_now():
    plan = tick_plan.plan(EVERY_MINUTE, at(5), at(5, 0.3))
    assert plan.enqueue == (at(5),) and plan.skipped == 0 and plan.next_run_at == at(6)
    assert not tick_plan.plan(EVERY_MINUTE, at(6), at(5, 59)).changes_anything


@pytest.mark.parametrize("missed", tick_plan.POLICIES)
def test_ticks_late_by_less_than_the_grace_are_all_enqueued_whatever_the_policy(missed):
    plan = tick_plan.plan(IntervalTimetable(2), at(0), at(0, 9), missed=missed, catch_up=1,
                          grace_seconds=10)
    assert plan.enqueue == tuple(at(0, s) for s in (0, 2, 4, 6, 8))
    assert (plan.skipped, plan.backlog, plan.next_run_at) == (0, False, at(0, 10))


def test_latest_runs_the_most_recent_missed_tick_once_and_counts_the_rest():
    plan = tick_plan.plan(EVERY_MINUTE, at(0), at(90, 30), missed="latest")
    assert plan.enqueue == (at(90),)
    assert (plan.skipped, plan.first_skipped, plan.last_skipped) == (90, at(0), at(89))
    assert plan.next_run_at == at(91) and plan.backlog


def test_skip_runs_only_what_is_within_the_grace():
    plan = tick_plan.plan(EVERY_MINUTE, at(0), at(90, 30), missed="skip")
    assert plan.enqueue == (at(90),) and plan.skipped == 90  # 30 s late: within 60 s
    plan = tick_plan.plan(EVERY_MINUTE, at(0), at(90, 30), missed="skip", grace_seconds=10)
    assert plan.enqueue == () and plan.skipped == 91 and plan.next_run_at == at(91)


def test_catch_up_runs_the_most_recent_ticks_up_to_its_bound_oldest_first():
    plan = tick_plan.plan(EVERY_MINUTE, at(0), at(90, 30), missed="catch_up", catch_up=5)
    assert plan.enqueue == tuple(at(m) for m in range(86, 91))
    assert plan.skipped == 86 and plan.last_skipped == at(85)
    plan = tick_plan.plan(EVERY_MINUTE, at(0), at(3, 30), missed="catch_up", catch_up=10)
    assert plan.enqueue == tuple(at(m) for m in range(4)) and plan.skipped == 0


@pytest.mark.parametrize(("missed", "catch_up"), [("latest", 1), ("skip", 1), ("catch_up", 3)])
def test_a_backlog_longer_than_one_pass_ends_as_if_walked_at_once(missed, catch_up):
    """An every-minute schedule after 1000 minutes without a worker, walking 100 ticks a pass:
    the passes skip what is late and keep their place; the last one applies the policy."""
    now = at(1000, 30)
    whole = tick_plan.plan(EVERY_MINUTE, at(0), now, missed=missed, catch_up=catch_up)
    cursor, skipped, enqueued = at(0), 0, []
    for _ in range(50):
        part = tick_plan.plan(EVERY_MINUTE, cursor, now, missed=missed, catch_up=catch_up,
                              max_ticks=100)
        skipped += part.skipped
        enqueued += part.enqueue
        cursor = part.next_run_at
        if cursor > now:
            break
    assert (tuple(enqueued), skipped, cursor) == (whole.enqueue, whole.skipped,
                                                   whole.next_run_at)
