"""Maintenance: the housekeeping every worker takes part in, one duty per module.

    leader.py   which worker runs the cluster-wide steps: a lease row in the database
    expirer.py  queued and failed jobs past their expires_at become expired
    reaper.py   dead workers' rows are deleted and their running jobs rescued at once
    rescuer.py  running jobs whose lease ran out are failed as lost (WorkerLost)
    cleaner.py  finished jobs past their retention are deleted
    orphans.py  waiting jobs whose parents are gone are settled (after each cleaner's sweep)
    rollup.py   finished jobs are counted per minute and hour, for the dashboard's throughput

Every MAINTENANCE_INTERVAL_SECONDS each worker process calls ``Maintenance.run_once()``. It asks
for the leader's term; every worker then reaps the dead workers of its own process table (a pid
check, which only it can make); the leader alone also expires, reaps silent workers, rescues
and prunes. Each step works in batches, each batch one short transaction with, on PostgreSQL, a
statement timeout; no pass is ever one big transaction. Every step is fenced or idempotent, so
steps that overlap (a former leader still finishing a batch) are safe on every database.
After an outage it observed, a process rescues nothing and reaps no silent worker for one lease
(outage_grace.py): the leases the outage let expire are live workers' until they could renew them.
"""

import logging
import time
from dataclasses import asdict, dataclass

from django.db import DatabaseError, connections

from ...conf import get_settings
from ...db import outages
from .cleaner import Cleaner, CleanerConfig
from .expirer import Expirer, ExpirerConfig
from .leader import Leader, LeaderConfig, default_holder
from .orphans import Orphans, OrphansConfig
from .outage_grace import OutageGrace
from .reaper import Reaper, ReaperConfig
from .rescuer import Rescuer, RescuerConfig
from .rollup import Rollup, RollupConfig

# The logger keeps the name it had before the module moved (docs/operations.md lists it).
logger = logging.getLogger("django_sqlqueue.worker.maintenance")


@dataclass(frozen=True)
class MaintenanceResult:
    leading: bool = False  # this process held the leader's term during the pass
    expired: int = 0
    reaped: int = 0
    rescued: int = 0  # by the rescuer, and by the reaper for the dead workers' jobs
    pruned: int = 0
    orphaned: int = 0  # parents found gone, their waiting children settled (logged on its own)
    failed_steps: tuple = ()  # names of the steps that failed this pass (logged; tried again)

    def counts(self) -> dict:
        return {key: value for key, value in asdict(self).items()
                if key in ("expired", "reaped", "rescued", "pruned")}


class Maintenance:
    def __init__(self, *, alias: str, lease_seconds: float, keep_succeeded, keep_failed,
                 worker_id: str | None = None, settings=None, table=None,
                 clock=time.monotonic, server_uptime=outages.server_uptime):
        """The steps of one process, configured from ``settings`` (default: SQLQUEUE).
        ``worker_id`` is the name this process leads under (runworker: its worker name);
        ``table`` its process table (default: identity.current()); ``server_uptime`` how the
        outage grace reads the server's uptime (tests give a known one)."""
        settings = settings or get_settings()
        batch = settings.MAINTENANCE_BATCH_SIZE
        timeout = settings.MAINTENANCE_STATEMENT_TIMEOUT_SECONDS
        self.alias = alias
        self.leader = Leader(
            LeaderConfig(holder=worker_id or default_holder(),
                         term_seconds=3 * settings.MAINTENANCE_INTERVAL_SECONDS),
            alias=alias, clock=clock,
        )
        self.expirer = Expirer(ExpirerConfig(batch, timeout), alias=alias)
        self.reaper = Reaper(
            ReaperConfig(lease_seconds=lease_seconds, statement_timeout_seconds=timeout),
            alias=alias, table=table,
        )
        self.rescuer = Rescuer(RescuerConfig(batch, timeout), alias=alias)
        self.cleaner = Cleaner(
            CleanerConfig(keep_succeeded_seconds=keep_succeeded, keep_failed_seconds=keep_failed,
                          batch_size=batch, statement_timeout_seconds=timeout,
                          interval_seconds=settings.PRUNE_INTERVAL_SECONDS),
            alias=alias, clock=clock,
        )
        # No rescue and no silent worker reaped for one lease after an outage (outage_grace.py).
        self.grace = OutageGrace(alias=alias, lease_seconds=lease_seconds, clock=clock,
                                 uptime=server_uptime)
        self.orphans = Orphans(OrphansConfig(batch, timeout), alias=alias)
        self.rollup = Rollup(RollupConfig(statement_timeout_seconds=timeout), alias=alias)

    def run_once(self, now=None) -> MaintenanceResult:
        """One pass. ``now`` replaces the database's clock in every step but the leader's term
        (tests drive time with it)."""
        try:
            return self._pass(now)
        except Exception as exc:
            self.grace.failed(exc)
            raise

    def _pass(self, now) -> MaintenanceResult:
        failed, orphaned = [], 0
        leading = self.leader.run_once().leading
        self.grace.answered()
        # After an outage, let live workers renew their leases (asked of the leader only).
        holding = leading and self.grace.holds()
        keep = self.leader.keep
        counts = dict.fromkeys(("expired", "reaped", "rescued", "pruned"), 0)
        if leading:
            result = self._step("expire", failed, lambda: self.expirer.run_once(now,
                                                                              keep_going=keep))
            counts["expired"] = result.expired if result else 0
        result = self._step("reap", failed, lambda: self.reaper.run_once(
            now, silent=leading and not holding))
        if result:
            counts["reaped"], counts["rescued"] = len(result.reaped), result.rescued
        if leading and not holding and self.leader.keep():
            result = self._step("rescue", failed, lambda: self.rescuer.run_once(
                now, keep_going=keep))
            counts["rescued"] += result.rescued if result else 0
        if leading and self.cleaner.is_due() and self.leader.keep():
            result = self._step("prune", failed, lambda: self.cleaner.run_once(now,
                                                                              keep_going=keep))
            counts["pruned"] = result.deleted if result else 0
            if result and result.done and self.leader.keep():  # at most once per sweep
                result = self._step("orphans", failed, lambda: self.orphans.run_once(
                    now, keep_going=keep))
                orphaned = result.parents if result else 0
        if leading and self.leader.keep():
            self._step("rollup", failed, lambda: self.rollup.run_once(now, keep_going=keep))
        if any(counts.values()):
            logger.info("maintenance %s", " ".join(f"{k}={v}" for k, v in counts.items()))
        return MaintenanceResult(leading=leading, failed_steps=tuple(failed), orphaned=orphaned,
                                 **counts)

    def resign(self) -> bool:
        """Hand the leader's term on at once (for a clean exit)."""
        return self.leader.resign()

    def _step(self, name, failed, run):
        """Run one step; a database error that leaves the connection usable (a statement
        timeout, a deadlock) fails that step alone, to be tried again at the next pass. An
        unusable connection (an outage) propagates, for the caller's retry with backoff."""
        try:
            return run()
        except DatabaseError as exc:
            if not connections[self.alias].is_usable():
                raise
            failed.append(name)
            text = str(exc).strip()
            logger.warning("maintenance step=%s failed (%s); the next pass tries again", name,
                           text.splitlines()[0] if text else type(exc).__name__)
            return None
