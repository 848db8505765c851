"""What the maintenance steps share: checking their configs, and working in batches.

Each step (expirer, rescuer, reaper, cleaner) is a small class with a frozen config dataclass,
whose fields have their defaults in conf.py's ``QueueSettings`` and are checked when it is made,
and a ``run_once(now=None)`` that does one round and returns a small result dataclass. Work on
many rows goes batch by batch, each batch one short transaction (``batches.short_transaction``).
"""

from collections.abc import Callable
from dataclasses import dataclass

from ...conf import QueueSettings
from ...db.batches import short_transaction

_defaults = QueueSettings()


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


@dataclass(frozen=True)
class BatchConfig:
    """The config of a step that changes rows batch by batch (the expirer, the rescuer)."""

    # Rows changed per statement, each batch its own transaction (MAINTENANCE_BATCH_SIZE).
    batch_size: int = _defaults.MAINTENANCE_BATCH_SIZE
    # PostgreSQL: time limit of each batch's statements (None: none).
    statement_timeout_seconds: float | None = _defaults.MAINTENANCE_STATEMENT_TIMEOUT_SECONDS

    def __post_init__(self):
        check(self, positive(self, "batch_size")
              + positive(self, "statement_timeout_seconds", none_allowed=True))


class BatchStep:
    """A step that changes rows batch by batch until none are left (the expirer, the rescuer):
    ``batch(now, size)`` changes up to ``size`` rows and returns how many; ``run_once`` calls it
    until a batch comes short and returns ``result_class(rows changed, batches)``."""

    config_class = BatchConfig
    result_class: type  # a frozen dataclass of (rows changed, batches run)

    def __init__(self, config: BatchConfig | None = None, *, alias: str):
        self.config = config or self.config_class()
        self.alias = alias

    def batch(self, now, size: int) -> int:
        raise NotImplementedError

    def run_once(self, now=None, *, keep_going=None):
        """Every row due ("now": the database's clock, or ``now``), batch by batch; stops early
        when ``keep_going()``, asked between batches, says no."""
        size = self.config.batch_size
        changed, batches, _ = run_batches(
            self.alias, lambda: self.batch(now, size), size=size,
            statement_timeout=self.config.statement_timeout_seconds, keep_going=keep_going,
        )
        return self.result_class(changed, batches)
