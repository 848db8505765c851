"""The reaper: delete the rows of dead workers and rescue their running jobs at once.

A worker is dead when either

- it sent no heartbeat for ``silent_leases`` (2) of its own leases, by the database's clock:
  wherever it runs, it is gone, frozen or cut off. The leader judges this for every worker.
- its pid no longer exists in a process table that is provably the reaper's own: same kernel
  boot and same pid namespace (worker/identity.py). Every worker judges this for the workers of
  its own table, at every pass, so a crashed process is found within one maintenance interval.
  A shared host name is never taken as proof: containers share host names, not process tables.

Each reaping is one short transaction: the row is deleted only if its heartbeat is still the one
read (a worker that beat meanwhile is alive after all), then its running jobs are rescued,
whatever their leases say.
"""

import logging
import os
from dataclasses import dataclass

from ...conf import QueueSettings
from ...db.batches import short_transaction
from ...db.clock import DatabaseNow
from ...models import Job, Worker
from .. import identity
from .steps import check, positive

# The logger keeps the name it had before the module moved (docs/operations.md lists it).
logger = logging.getLogger("django_sqlqueue.worker.reaper")
_defaults = QueueSettings()


@dataclass(frozen=True)
class ReaperConfig:
    # This process's LEASE_SECONDS: the lease of worker rows that do not record their own.
    lease_seconds: float = _defaults.LEASE_SECONDS
    # A worker is dead after this many of its own leases without a heartbeat. It beats every
    # third of a lease, so two leases are six missed heartbeats.
    silent_leases: float = 2.0
    # PostgreSQL: time limit of each reaping's statements (None: none).
    statement_timeout_seconds: float | None = _defaults.MAINTENANCE_STATEMENT_TIMEOUT_SECONDS

    def __post_init__(self):
        problems = positive(self, "lease_seconds", "silent_leases")
        problems += positive(self, "statement_timeout_seconds", none_allowed=True)
        if isinstance(self.silent_leases, int | float) and self.silent_leases < 1:
            problems.append("silent_leases must be at least 1: a live worker's lease would "
                            "outlast its row")
        check(self, problems)


@dataclass(frozen=True)
class Reaped:
    worker: str  # its name
    reason: str
    rescued: int  # its running jobs, failed as lost


@dataclass(frozen=True)
class ReaperResult:
    reaped: tuple = ()  # of Reaped

    @property
    def rescued(self) -> int:
        return sum(r.rescued for r in self.reaped)


class Reaper:
    def __init__(self, config: ReaperConfig | None = None, *, alias: str,
                 table: identity.ProcessTable | None = None, pid_alive=identity.pid_alive):
        self.config = config or ReaperConfig()
        self.alias = alias
        self.table = table or identity.current()  # the process table this process can judge
        self.pid_alive = pid_alive

    def run_once(self, now=None, *, silent=True) -> ReaperResult:
        """Reap dead workers: those of this process table whose pid is gone, and with ``silent``
        (the leader) every worker without a recent heartbeat. "Now" is the database's clock,
        or ``now``."""
        workers = Worker.objects.using(self.alias).order_by("pk")
        if not silent:
            if not self.table.known:
                return ReaperResult()
            workers = workers.filter(boot_id=self.table.boot_id,
                                     pid_namespace=self.table.pid_namespace)
        reaped = []
        for worker in workers.annotate(db_now=DatabaseNow()):
            reason = self._why_dead(worker, now or worker.db_now, silent=silent)
            if reason is not None:
                result = self._reap(worker, reason, now)
                if result is not None:
                    reaped.append(result)
        return ReaperResult(reaped=tuple(reaped))

    def _why_dead(self, worker, now, *, silent) -> str | None:
        if silent:
            lease = worker.lease_seconds or self.config.lease_seconds
            quiet = (now - worker.last_heartbeat_at).total_seconds()
            if quiet > self.config.silent_leases * lease:
                return "it stopped sending heartbeats"
        if (self.table.same_as(worker.boot_id, worker.pid_namespace)
                and worker.pid != os.getpid() and not self.pid_alive(worker.pid)):
            return f"its process {worker.pid} no longer exists"
        return None

    def _reap(self, worker, reason, now) -> Reaped | None:
        with short_transaction(self.alias, self.config.statement_timeout_seconds):
            deleted, _ = Worker.objects.using(self.alias).filter(
                pk=worker.pk, last_heartbeat_at__lte=worker.last_heartbeat_at
            ).delete()
            if not deleted:
                return None  # gone already, or it beat meanwhile: alive after all
            rescued = Job.objects.using(self.alias).filter(claimed_by=worker.name).rescue(
                now, reason=f"worker {worker.name} is dead: {reason}", limit=None
            )
        logger.warning("reaped dead worker=%s reason=%r rescued=%s", worker.name, reason,
                       rescued)
        return Reaped(worker=worker.name, reason=reason, rescued=rescued)
