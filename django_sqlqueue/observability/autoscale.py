"""How many worker processes the work wants: the autoscaler's decision, a pure function of what
was measured (no database, no clock: tests call it directly).

One formula, shared by ``runworker --autoscale``, the ``sqlqueue_autoscale_desired_processes``
gauge, ``manage.py stats --json`` and the KEDA/HPA examples of docs/autoscaling.md::

    desired = max(ceil((running + due) / concurrency),          # every job present on a slot
                  processes + 1 if oldest due job waited > target wait else 0)

clamped to [minimum, maximum]. Depth alone is a known trap (a burst drains between two looks,
busy workers are scaled away): the running jobs keep their processes, and the age of the oldest
due job says that work waits, whatever the depth.

``decide()`` adds hysteresis for a scaler that acts on it every few seconds (``ScalerState``
carries what it remembers between looks):

- it **grows** at once when jobs wait past the target or arrive faster than they complete
  (arrivals over 1.25 completions while the oldest due job is past half the target): to the
  formula's count, and one more than now if that is not more, but by the "one more" rule only
  once per target wait, so a process just started has time to claim;
- it **shrinks** one process at a time, and only after the formula has wanted fewer processes,
  with no due job older than half the target, for a whole cool-down since the last change.

A steady trickle that the current processes keep up with therefore changes nothing, and a burst
grows to the maximum in one step.
"""

import math
from dataclasses import dataclass, field, replace

#: Arrivals must exceed completions by this factor before the backlog counts as growing.
OUTPACE_FACTOR = 1.25
GROW, SHRINK, HOLD = "grow", "shrink", "hold"


@dataclass(frozen=True)
class ScaleSettings:
    minimum: int  # processes never fewer (0: scale to zero; only a platform can wake from it)
    maximum: int  # processes never more
    target_wait: float  # seconds a due job may wait for a slot before more processes are wanted
    cooldown: float  # seconds the spare processes must sit idle before one is retired


@dataclass(frozen=True)
class QueueLoad:
    """One queue, now."""

    queue: str
    due: int = 0  # jobs due now and waiting for a slot (queued or failed-to-retry, run_at past)
    running: int = 0
    oldest_due_age: float | None = None  # seconds its oldest due job has waited; None: none due


class QueueTotals:
    """Totals over ``self.queues`` (QueueLoad values), for the classes that hold them."""

    queues: tuple

    @property
    def due(self) -> int:
        return sum(q.due for q in self.queues)

    @property
    def running(self) -> int:
        return sum(q.running for q in self.queues)

    @property
    def oldest_due_age(self) -> float | None:
        ages = [q.oldest_due_age for q in self.queues if q.oldest_due_age is not None]
        return max(ages) if ages else None


@dataclass(frozen=True)
class Measurements(QueueTotals):
    """What the scaler sees at one look (``at``: seconds on any monotonic clock)."""

    at: float
    processes: int  # worker processes now (the scaler's own, or the fleet's)
    concurrency: int  # job slots per process
    queues: tuple = ()  # of QueueLoad, the queues served
    busy_share: float = 0.0  # running jobs / live slots, from 0 to 1
    arrivals_per_second: float | None = None  # None: not known yet (the first look)
    completions_per_second: float | None = None


@dataclass(frozen=True)
class ScalerState:
    """What ``decide()`` remembers from one look to the next."""

    changed_at: float | None = None  # when the process count last changed
    quiet_since: float | None = None  # since when fewer processes would have done


@dataclass(frozen=True)
class Decision:
    desired: int
    action: str  # GROW, SHRINK or HOLD
    reason: str
    state: ScalerState = field(default_factory=ScalerState)


def desired_processes(m: Measurements, s: ScaleSettings) -> int:
    """The formula above: processes the work wants now, clamped to [minimum, maximum]."""
    wanted = work_processes(m)
    if _waits(m, s):
        wanted = max(wanted, m.processes + 1)
    return _clamp(wanted, s)


def work_processes(m: Measurements) -> int:
    """Processes that would put every running and due job on a slot."""
    return math.ceil((m.running + m.due) / max(m.concurrency, 1))


def decide(m: Measurements, s: ScaleSettings, state: ScalerState = ScalerState()) -> Decision:
    """The process count to have now, with the reason and the state for the next look."""
    current = m.processes
    since_change = math.inf if state.changed_at is None else m.at - state.changed_at
    changed = replace(state, changed_at=m.at, quiet_since=None)
    if current < s.minimum or current > s.maximum:
        target = _clamp(current, s)
        return Decision(target, GROW if target > current else SHRINK,
                        f"keep within {s.minimum}..{s.maximum}", changed)
    age = m.oldest_due_age
    waits, outpaced = _waits(m, s), _outpaced(m, s)
    if (waits or outpaced) and current < s.maximum:
        target = work_processes(m)
        if since_change >= s.target_wait:
            target = max(target, current + 1)
        target = _clamp(target, s)
        why = (f"oldest due job waited {age:.1f}s (target {s.target_wait:g}s)" if waits else
               f"{m.arrivals_per_second:.1f} jobs/s arrive, {m.completions_per_second:.1f}/s "
               "complete")
        if target > current:
            return Decision(target, GROW, f"{why}; {m.due} due, {m.running} running", changed)
        return Decision(current, HOLD, f"{why}; waiting for the processes just started",
                        replace(state, quiet_since=None))
    if waits or outpaced:
        return Decision(current, HOLD, f"at the maximum of {s.maximum}: {_steady(m, s)}",
                        replace(state, quiet_since=None))
    quiet = (_clamp(work_processes(m), s) < current
             and (age is None or age <= s.target_wait / 2))
    if not quiet:
        return Decision(current, HOLD, f"steady: {_steady(m, s)}",
                        replace(state, quiet_since=None))
    quiet_since = m.at if state.quiet_since is None else state.quiet_since
    idle_for = m.at - quiet_since
    if idle_for >= s.cooldown and since_change >= s.cooldown:
        return Decision(current - 1, SHRINK,
                        f"slots idle for {idle_for:.0f}s (cool-down {s.cooldown:g}s): "
                        f"{m.busy_share:.0%} busy, {m.due} due, {m.running} running",
                        ScalerState(changed_at=m.at, quiet_since=m.at))
    return Decision(current, HOLD, f"quiet: {_steady(m, s)}; idle for {idle_for:.0f}s of the "
                    f"{s.cooldown:g}s cool-down", replace(state, quiet_since=quiet_since))


def _waits(m: Measurements, s: ScaleSettings) -> bool:
    age = m.oldest_due_age
    return m.due > 0 and age is not None and age > s.target_wait


def _outpaced(m: Measurements, s: ScaleSettings) -> bool:
    age = m.oldest_due_age
    if m.arrivals_per_second is None or m.completions_per_second is None:
        return False
    return (m.due > 0 and age is not None and age > s.target_wait / 2
            and m.arrivals_per_second > OUTPACE_FACTOR * m.completions_per_second)


def _steady(m: Measurements, s: ScaleSettings) -> str:
    age = m.oldest_due_age
    waited = "no job due" if age is None else f"oldest due job waited {age:.1f}s"
    return f"{waited} (target {s.target_wait:g}s), {m.busy_share:.0%} of slots busy"


def _clamp(n: int, s: ScaleSettings) -> int:
    return max(s.minimum, min(s.maximum, n))
