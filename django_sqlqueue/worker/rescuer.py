"""The rescuer: running jobs whose lease ran out are failed as lost with their worker.

A worker renews the leases of the jobs it runs at every heartbeat; a lease that ran out means
the worker is dead, frozen or cut off. Each job becomes ``failed`` and due now, or ``exhausted``
on its last attempt, with a ``WorkerLost`` entry in its errors. Set-based: one UPDATE per batch
(``JobQuerySet.rescue``), oldest lease first, each its own short transaction, fenced on the
claim token and the lease as read so that a heartbeat renewing the lease meanwhile wins.
"""

from dataclasses import dataclass

from ..conf import QueueSettings
from ..models import Job
from .steps import check, positive, run_batches

_defaults = QueueSettings()


@dataclass(frozen=True)
class RescuerConfig:
    # Jobs rescued per statement, each batch its own transaction (MAINTENANCE_BATCH_SIZE).
    batch_size: int = _defaults.MAINTENANCE_BATCH_SIZE
    # PostgreSQL: time limit of each batch's statements (None: none).
    statement_timeout_seconds: float | None = _defaults.MAINTENANCE_STATEMENT_TIMEOUT_SECONDS

    def __post_init__(self):
        check(self, positive(self, "batch_size")
              + positive(self, "statement_timeout_seconds", none_allowed=True))


@dataclass(frozen=True)
class RescuerResult:
    rescued: int = 0
    batches: int = 0


class Rescuer:
    def __init__(self, config: RescuerConfig | None = None, *, alias: str):
        self.config = config or RescuerConfig()
        self.alias = alias

    def run_once(self, now=None, *, keep_going=None) -> RescuerResult:
        """Rescue every running job whose lease ran out ("now": the database's clock, or
        ``now``)."""
        size = self.config.batch_size
        rescued, batches, _ = run_batches(
            self.alias,
            lambda: Job.objects.using(self.alias).lease_expired(now).rescue(now, limit=size),
            size=size, statement_timeout=self.config.statement_timeout_seconds,
            keep_going=keep_going,
        )
        return RescuerResult(rescued=rescued, batches=batches)
