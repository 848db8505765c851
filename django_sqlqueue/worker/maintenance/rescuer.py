"""The rescuer: running jobs whose lease ran out are failed as lost with their worker.

A worker renews the leases of the jobs it runs at every heartbeat; a lease that ran out means
the worker is dead, frozen or cut off. Each job becomes ``failed`` and due now, or ``exhausted``
on its last attempt, with a ``WorkerLost`` entry in its errors. Set-based: one UPDATE per batch
(``JobQuerySet.rescue``), oldest lease first, each its own short transaction, fenced on the
claim token and the lease as read so that a heartbeat renewing the lease meanwhile wins.
"""

from dataclasses import dataclass

from ...models import Job
from .steps import BatchConfig, BatchStep


class RescuerConfig(BatchConfig):
    """The rescuer's batch size and statement timeout."""


@dataclass(frozen=True)
class RescuerResult:
    rescued: int = 0
    batches: int = 0


class Rescuer(BatchStep):
    """Rescues every running job whose lease ran out; ``run_once`` returns a ``RescuerResult``."""

    config_class = RescuerConfig
    result_class = RescuerResult

    def batch(self, now, size: int) -> int:
        return Job.objects.using(self.alias).lease_expired(now).rescue(now, limit=size)
