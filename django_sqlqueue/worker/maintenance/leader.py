"""The leader: the one worker at a time that runs maintenance's cluster-wide steps.

Leadership is a lease in the database, not a lock held by a connection: one ``Leader`` row per
duty, held by one worker until its term ends, renewed by that worker at every pass, taken over by
the first candidate to ask once the term has run out, or at once by a registered worker when the
holder has no worker row (a clean exit deletes it, so a restart hands the duty on without a
wait). All on the database's clock. A lease row rather than PostgreSQL's session advisory lock
because it works the same on SQLite, behind PgBouncer in transaction pooling mode (where a
session lock stays with the server connection, not with the worker), and on MariaDB; and
because a leader that freezes, or whose connection hangs unnoticed, loses its term by the clock.

Leading is an optimisation, not what keeps the data right: every step is fenced or idempotent,
so two leaders at once (a frozen leader waking up after its term) only repeat work.
"""

import logging
import os
import secrets
import socket
import time
from dataclasses import dataclass, field

from django.db import connections

from ...conf import QueueSettings
from ...db import ops, returning
from ...models import Leader as LeaderRow
from ...models import Worker
from .steps import check, positive

# The logger keeps the name it had before the module moved (docs/operations.md lists it).
logger = logging.getLogger("django_sqlqueue.worker.leader")


def default_holder() -> str:
    """A name unique to this process, for callers that are not a registered worker."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass(frozen=True)
class LeaderConfig:
    # The duty led; one row of the leader table each.
    name: str = "maintenance"
    # Who asks: unique per process. runworker passes its worker name.
    holder: str = field(default_factory=default_holder)
    # A term lasts this long after each renewal. The leader renews at every pass (every
    # MAINTENANCE_INTERVAL_SECONDS) and during long steps, so three intervals leave room for two
    # late passes; a dead leader's duty waits at most this long for a successor.
    term_seconds: float = 3 * QueueSettings().MAINTENANCE_INTERVAL_SECONDS

    def __post_init__(self):
        problems = positive(self, "term_seconds")
        if not 1 <= len(self.name) <= 100:
            problems.append("name must be 1 to 100 characters")
        if not 1 <= len(self.holder) <= 255:
            problems.append("holder must be 1 to 255 characters")
        check(self, problems)


@dataclass(frozen=True)
class LeaderResult:
    leading: bool  # this process holds the term now
    changed: bool  # it did not before this call (elected), or did and no longer does (lost)


class Leader:
    def __init__(self, config: LeaderConfig | None = None, *, alias: str,
                 clock=time.monotonic):
        self.config = config or LeaderConfig()
        self.alias = alias
        self.clock = clock  # for when to renew during long steps; terms are the database's
        self.leading = False
        self.renewed_at = None  # self.clock() at the last successful renewal

    def run_once(self, now=None) -> LeaderResult:
        """Ask for the term: take it if vacant or run out, renew it if ours. ``now`` is not
        used: a term is real time, on the database's clock, even when a test injects a clock."""
        connection = connections[self.alias]
        leading = bool(returning.fetch(connection, *ops(connection).elect_leader(
            LeaderRow, Worker, name=self.config.name, holder=self.config.holder,
            term_seconds=self.config.term_seconds)))
        changed = leading != self.leading
        self.leading = leading
        self.renewed_at = self.clock() if leading else None
        if changed:
            logger.info("%s leader=%s %s", self.config.name, self.config.holder,
                        "elected" if leading else "lost its term")
        return LeaderResult(leading=leading, changed=changed)

    def keep(self) -> bool:
        """Between the batches of a long step: renew once a third of the term has passed since
        the last renewal; return whether this process still leads."""
        if not self.leading:
            return False
        if self.clock() - self.renewed_at >= self.config.term_seconds / 3:
            return self.run_once().leading
        return True

    def resign(self) -> bool:
        """Give the term up at once (a clean exit), so another worker need not wait for it."""
        deleted, _ = LeaderRow.objects.using(self.alias).filter(
            name=self.config.name, holder=self.config.holder
        ).delete()
        self.leading, self.renewed_at = False, None
        return bool(deleted)
