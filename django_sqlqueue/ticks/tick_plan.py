"""Which of a schedule's due ticks to enqueue and which to skip: the missed-tick policies.

A schedule's cursor (``Schedule.next_run_at``) is its first tick not yet handled. At "now", the due
ticks are the ticks from the cursor up to now. ``plan()`` decides their fate, and the scheduler then
enqueues the chosen ones and moves the cursor past now, in one fenced write
(schedules/operations.py): the decision is made once, by whichever process wins that write, however
many try at the same moment.

- No due tick is *late* (found more than ``grace`` seconds after its time): every due tick is
  enqueued, whatever the policy. A scheduler that runs a few seconds behind (a slow pass, a
  short database hiccup) delays ticks; it never drops them.
- Some are late: a backlog, after downtime (no worker running, the database away for longer
  than the grace). Then the policy decides:

  ``latest`` (the default): the most recent due tick is enqueued, once; the others are skipped.
  ``skip``: only the due ticks that are not late are enqueued (often none); the rest are skipped.
  ``catch_up``: the ``catch_up`` most recent due ticks are enqueued, oldest first; older ones are
  skipped.

Skipped ticks are never silent: they are counted on the schedule and logged as a warning.
"""

import datetime as dt
from dataclasses import dataclass

from ..statuses import CATCH_UP, LATEST, SKIP
from ..statuses import MISSED_POLICIES as POLICIES
from .timetables import ticks_from

#: The most ticks one pass walks through. Past it (an every-minute cron after months without a
#: worker), the pass skips the late ones it walked, keeps its place, and the next pass goes on;
#: walking 100,000 cron ticks takes about a second.
MAX_TICKS_PER_PASS = 100_000
#: Bounds of the settings, checked where schedules are declared.
MAX_CATCH_UP = 1000
MAX_GRACE_SECONDS = 86400.0


@dataclass(frozen=True)
class TickPlan:
    enqueue: tuple = ()  # ticks to enqueue, oldest first
    skipped: int = 0  # due ticks not enqueued, by the policy
    first_skipped: dt.datetime | None = None
    last_skipped: dt.datetime | None = None
    next_run_at: dt.datetime | None = None  # the new cursor: the first tick not handled
    backlog: bool = False  # some due tick was late

    @property
    def changes_anything(self) -> bool:
        return bool(self.enqueue or self.skipped)


def plan(table, cursor: dt.datetime, now: dt.datetime, *, missed: str = LATEST,
         catch_up: int = 1, grace_seconds: float = 60.0,
         max_ticks: int = MAX_TICKS_PER_PASS) -> TickPlan:
    """The fate of the ticks of ``table`` from ``cursor`` to ``now`` (both included)."""
    if missed not in POLICIES:
        raise ValueError(f"missed={missed!r}: one of {', '.join(POLICIES)}")
    grace = dt.timedelta(seconds=grace_seconds)
    due = []
    following = None  # the first tick after the due ones: the cursor once they are handled
    for tick in ticks_from(table, cursor):
        if tick > now or len(due) == max_ticks:
            following = tick
            break
        due.append(tick)
    if not due:
        return TickPlan(next_run_at=following)

    if following is not None and following <= now:
        # More due ticks than one pass walks: those walked are late (the later ones are due
        # too), except, at most, the few a policy may still enqueue; keep those for the next
        # pass, which goes on from the first of them.
        keep = catch_up if missed == CATCH_UP else 1
        first_on_time = next((i for i, tick in enumerate(due) if now - tick <= grace), len(due))
        cut = max(1, min(len(due) - keep, first_on_time))
        return _skipping(due[:cut], next_run_at=due[cut] if cut < len(due) else following)

    if now - due[0] <= grace:  # nothing is late: a delay, not a miss
        return TickPlan(enqueue=tuple(due), next_run_at=following)
    if missed == LATEST:
        chosen = due[-1:]
    elif missed == SKIP:
        chosen = [tick for tick in due if now - tick <= grace]
    else:
        chosen = due[-catch_up:]
    skipped = due[: len(due) - len(chosen)]
    result = _skipping(skipped, next_run_at=following)
    return TickPlan(enqueue=tuple(chosen), skipped=result.skipped,
                    first_skipped=result.first_skipped, last_skipped=result.last_skipped,
                    next_run_at=following, backlog=True)


def _skipping(ticks: list, *, next_run_at) -> TickPlan:
    return TickPlan(skipped=len(ticks), first_skipped=ticks[0] if ticks else None,
                    last_skipped=ticks[-1] if ticks else None, next_run_at=next_run_at,
                    backlog=True)
