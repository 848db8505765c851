"""When a schedule's ticks fall: a cron expression in a time zone, or a plain interval.

A tick is an instant; every function here takes and returns aware datetimes, ticks in UTC.

Cron expressions are evaluated by cronsim (https://github.com/cuu508/cronsim), which follows
Debian's cron, daylight saving time included; the two rules that matter are in
``CronTimetable``'s docstring and docs/schedules.md. We do not parse cron ourselves: the only
text handled here is the table of ``@hourly``-style aliases, which cronsim does not know.

Intervals are real seconds, aligned to the Unix epoch in UTC (``every=3600`` ticks on the hour,
UTC), so every process computes the same ticks whoever synced the schedule and whenever.
"""

import datetime as dt
import functools
from collections.abc import Iterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ..exceptions import InvalidPeriodicSchedule

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
#: The usual aliases, as Vixie and Debian cron define them (``@reboot`` has no meaning here).
CRON_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
#: Longest interval: a year. Longer ones are better said with cron.
MAX_INTERVAL_SECONDS = 366 * 86400


#: The five fields of a cron expression, in order, and the values each takes.
CRON_FIELDS = {
    "minute": "0-59",
    "hour": "0-23",
    "day-of-month": "1-31 (or L, the last day)",
    "month": "1-12 or jan-dec",
    "day-of-week": "0-7 (0 and 7 are Sunday) or sun-sat",
}


class CronTimetable:
    """Ticks of a five-field cron expression (or an alias) in a time zone.

    Daylight saving time, as Debian's cron does it (cronsim's tests pin each case):

    - A local time that does not exist (the clock springs forward, 02:00 -> 03:00): a job at a
      fixed time inside the gap (``30 2 * * *``) runs once, at the first minute after it (03:00).
      Expressions whose minute or hour field starts with ``*`` follow real time: the local
      times in the gap just do not occur (``*/15 * * * *`` runs at 01:45, then 03:00).
    - A local time that happens twice (the clock falls back, 03:00 -> 02:00): a job at a fixed
      time (``30 2 * * *``) runs once, at the first occurrence. Expressions whose minute or hour
      field starts with ``*`` follow real time and run in both occurrences (``15 * * * *`` runs
      at 02:15 summer time and again at 02:15 winter time, an hour later).
    """

    kind = "cron"

    def __init__(self, expression: str, timezone: str):
        self.expression = " ".join(str(expression).split())
        self.fields = CRON_ALIASES.get(self.expression.lower(), self.expression)
        if self.expression.startswith("@") and self.fields == self.expression:
            raise InvalidPeriodicSchedule(
                f"cron {expression!r}: unknown alias; use one of {', '.join(CRON_ALIASES)} or "
                "five fields."
            )
        if len(self.fields.split()) != 5:
            raise InvalidPeriodicSchedule(
                f"cron {expression!r} has {len(self.fields.split())} fields: write five "
                "(minute hour day-of-month month day-of-week), or an alias such as @daily. For "
                "ticks in seconds, use every=<seconds>."
            )
        self.timezone = str(timezone)
        self.zone = zone(timezone)
        try:
            first = next(CronSim(self.fields, dt.datetime(2000, 1, 1, tzinfo=self.zone)), None)
        except CronSimError as exc:
            raise InvalidPeriodicSchedule(f"cron {expression!r}: {self._explain(exc)}.") from None
        if first is None:
            raise InvalidPeriodicSchedule(f"cron {expression!r} never matches a date.")

    def _explain(self, error) -> str:
        """cronsim's "Bad minute" as which field, what it holds and what it may hold."""
        text = str(error)
        for position, (field, allowed) in enumerate(CRON_FIELDS.items()):
            if text == f"Bad {field}":
                value = self.fields.split()[position]
                if field == "day-of-month" and value.isdigit() and 1 <= int(value) <= 31:
                    return (f"day-of-month {value!r} is in none of the months "
                            f"{self.fields.split()[3]!r}")
                return (f"the {field} field {value!r} is not valid: it takes {allowed}, a range "
                        "(a-b), a list (a,b), a step (*/n) or *")
        return text

    def __repr__(self):
        return f"<CronTimetable {self.expression!r} {self.timezone}>"

    def ticks_after(self, instant: dt.datetime) -> Iterator[dt.datetime]:
        """The ticks strictly after ``instant`` (aware), in order, in UTC.

        Starting again from any tick gives the same ticks as going on from it: cronsim steps
        from the instant it is given, one second on, in the local time of the zone."""
        for local in CronSim(self.fields, instant.astimezone(self.zone)):
            yield local.astimezone(UTC)

    def describe(self) -> str:
        """``At 03:00 every day (0 3 * * *)``, in English."""
        try:
            text = CronSim(self.fields, dt.datetime(2000, 1, 1)).explain()
        except Exception:  # explain() is a convenience: never let it break a page
            return self.expression
        return f"{text} ({self.expression})"


class IntervalTimetable:
    """A tick every ``seconds`` real seconds (a whole number, at least 1), at the multiples of
    ``seconds`` since the Unix epoch in UTC. Daylight saving time does not change real seconds."""

    kind = "interval"
    timezone = "UTC"

    def __init__(self, seconds):
        if isinstance(seconds, dt.timedelta):
            seconds = seconds.total_seconds()
        if (isinstance(seconds, bool) or not isinstance(seconds, int | float)
                or seconds != int(seconds) or not 1 <= seconds <= MAX_INTERVAL_SECONDS):
            raise InvalidPeriodicSchedule(
                f"every={seconds!r}: an interval is a whole number of seconds from 1 to "
                f"{MAX_INTERVAL_SECONDS} (a year), or a timedelta of whole seconds."
            )
        self.seconds = int(seconds)
        self.step = dt.timedelta(seconds=self.seconds)

    def __repr__(self):
        return f"<IntervalTimetable every {self.seconds}s>"

    def ticks_after(self, instant: dt.datetime) -> Iterator[dt.datetime]:
        """The ticks strictly after ``instant`` (aware), in order, in UTC."""
        tick = EPOCH + ((instant - EPOCH) // self.step + 1) * self.step
        while True:
            yield tick
            tick += self.step

    def describe(self) -> str:
        """``every 2 seconds``, ``every 5 minutes``, ``every hour``."""
        for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
            if self.seconds % size == 0:
                count = self.seconds // size
                return f"Every {unit}" if count == 1 else f"Every {count} {unit}s"
        raise AssertionError("unreachable: every whole number is a number of seconds")


def zone(name) -> ZoneInfo:
    """The time zone named ``name`` (IANA: "Europe/Berlin"), or InvalidPeriodicSchedule."""
    try:
        return ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidPeriodicSchedule(
            f"time zone {name!r} is not in the IANA database (for example 'Europe/Berlin', "
            "'America/New_York' or 'UTC'); on Windows, install the tzdata package."
        ) from None


def timetable(*, cron: str | None = None, every=None, timezone: str = "UTC"):
    """A ``CronTimetable`` or an ``IntervalTimetable``: exactly one of ``cron`` and ``every``."""
    if (cron is None) == (every is None):
        raise InvalidPeriodicSchedule("a schedule takes exactly one of cron= and every=.")
    if cron is not None:
        if not isinstance(cron, str):
            raise InvalidPeriodicSchedule(f"cron={cron!r}: a cron expression is a string.")
        return CronTimetable(cron, timezone)
    zone(timezone)  # checked even though an interval does not use it
    return IntervalTimetable(every)


@functools.lru_cache(maxsize=256)
def of_row(cron, every_seconds, timezone):
    """The timetable of a schedule's row (``Schedule.timetable``), made once per definition."""
    if cron:
        return CronTimetable(cron, timezone)
    return IntervalTimetable(every_seconds)


def ticks_from(table, start: dt.datetime) -> Iterator[dt.datetime]:
    """The ticks at or after ``start``: ``start`` itself when it is a tick."""
    return table.ticks_after(start - dt.timedelta(microseconds=1))


def next_ticks(table, after: dt.datetime, count: int) -> list:
    """The first ``count`` ticks strictly after ``after`` (fewer if the expression ends)."""
    ticks = []
    for tick in table.ticks_after(after):
        ticks.append(tick)
        if len(ticks) == count:
            break
    return ticks
