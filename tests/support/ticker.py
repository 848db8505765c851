"""A ticking process for race tests:
``python -m tests.support.ticker HOLDER START_LINE FIRST_TICK STEP_SECONDS COUNT``.

Connects, waits for the go at START_LINE (tests/support/start_line.py: every process starts
together), then walks a simulated clock, ``now = FIRST_TICK + k * STEP`` for k = 0 .. COUNT - 1:
at each ``now`` it
runs ``Scheduler.run_once(now=now)`` until no schedule is due any more at that time (it, or
another process, handled the tick), then goes on to the next. So the processes share one
simulated clock, as real workers share the real one, and race for every tick; none waits for
a tick's time. Prints what its passes did as JSON.
"""

import datetime as dt
import json
import sys

import django

from tests.support.start_line import wait_for_go


def main(holder: str, start_line: str, first: str, step: float, count: int) -> None:
    django.setup()
    from django.db import connection

    from django_sqlqueue.worker.scheduler import Scheduler, SchedulerConfig

    scheduler = Scheduler(SchedulerConfig(holder=holder), alias="default")
    first_tick = dt.datetime.fromisoformat(first)
    totals = {"fired": 0, "lost": 0, "enqueued": 0, "skipped": 0}
    connection.ensure_connection()  # not part of the race
    wait_for_go(start_line, holder)
    for k in range(count):
        now = first_tick + dt.timedelta(seconds=k * step)
        while True:
            result = scheduler.run_once(now=now)
            for key in totals:
                totals[key] += getattr(result, key)
            if not result.due:
                break
    print(json.dumps(totals))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
