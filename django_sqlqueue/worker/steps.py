"""What the maintenance steps share: checking their configs, and working in batches.

Each step (expirer, rescuer, reaper, cleaner) is a small class with a frozen config dataclass,
whose fields have their defaults in conf.py's ``QueueSettings`` and are checked when it is made,
and a ``run_once(now=None)`` that does one round and returns a small result dataclass. Work on
many rows goes batch by batch, each batch one short transaction (``batches.short_transaction``).
"""

from collections.abc import Callable

from ..batches import short_transaction


class InvalidStepConfig(ValueError):
    """A maintenance step's config is out of range; the message names the field."""


def check(config, problems: list) -> None:
    """Raise ``InvalidStepConfig`` listing ``problems`` (strings), if any."""
    if problems:
        raise InvalidStepConfig(f"{type(config).__name__}: " + "; ".join(problems) + ".")


def positive(config, *names, none_allowed=False) -> list:
    """The problems of fields of ``config`` that must be more than zero (or None)."""
    problems = []
    for name in names:
        value = getattr(config, name)
        if value is None and none_allowed:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            problems.append(f"{name} must be more than 0{' or None' if none_allowed else ''}, "
                            f"not {value!r}")
    return problems


def run_batches(alias: str, batch: Callable[[], int], *, size: int,
                statement_timeout: float | None,
                keep_going: Callable[[], bool] | None = None) -> tuple[int, int, bool]:
    """Call ``batch()`` (which changes up to ``size`` rows and returns how many), each call in
    its own short transaction, until one changes fewer than ``size``. Stops early when
    ``keep_going()``, asked between batches, says no. Returns (rows changed, batches run,
    whether the work is done)."""
    total = batches = 0
    while True:
        with short_transaction(alias, statement_timeout):
            changed = batch()
        total += changed
        batches += 1
        if changed < size:
            return total, batches, True
        if keep_going is not None and not keep_going():
            return total, batches, False
