"""After an outage: no lease is held against a live worker until it had the time to renew it.

While the database cannot be reached, no worker can renew its leases, and an outage longer than
a lease leaves every running job's lease expired when the database comes back: a rescue (or the
reaper's judgement of silent workers) at that moment would take the jobs of live workers, each
an interruption counted towards ``max_interruptions``, for an outage that was not the jobs'
doing. So once this process observed the database unreachable (a maintenance pass failed with a
connection error and a new connection could not be made either), it rescues nothing and reaps
no silent worker until one ``lease_seconds`` after the database answered again: every live
worker renews its leases within that (its heartbeat beats every third of a lease, and a failed
beat is tried again within half an interval). What is left expired after that belongs to a
worker that is gone, and is rescued, counted, as ever. Every worker runs maintenance (to ask for
the leader's term), so whichever leads after the outage observed it too.

A server that restarted while this process ran holds the same grace until it has been up for
one lease, whether this process saw it go or not: through PgBouncer a statement sent while
PostgreSQL is down waits in the pooler's queue and goes through once it is back, so maintenance
may never see an error, and its rescue then ran beside the heartbeats that had waited in the
same queue (CI: a live worker's job rescued, an interruption counted, for an outage). The
server's uptime (its own clock: no skew) is asked once a pass, by the leader only, and only when
nothing else holds. It is the least the server may have been up (MariaDB's whole-second Uptime,
less one), so a server started within a second or two before this process looks started after
it, and is held too: a missed restart costs a live worker's job, a needless hold one lease.

A connection of this process that died while the server kept answering is not an outage here:
no grace (``outages.reachable`` says which).
"""

import time

from ...db import outages


class OutageGrace:
    def __init__(self, *, alias: str, lease_seconds: float, clock=time.monotonic,
                 reachable=outages.reachable, uptime=outages.server_uptime):
        self.alias = alias
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.reachable = reachable
        self.uptime = uptime  # (alias) -> the server's seconds up, None without a server
        self.started = time.monotonic()  # a server up for less than this started after us
        self.unreachable = False  # observed unreachable, not answered since
        self.back_at = None  # self.clock() when the database answered again

    def failed(self, error: BaseException) -> None:
        """A pass failed with ``error``: an outage if the database cannot be reached now."""
        if isinstance(error, outages.CONNECTION_ERRORS) and not self.reachable(self.alias):
            self.unreachable = True

    def answered(self) -> None:
        """A statement of this pass went through: the database is back, if it was away."""
        if self.unreachable:
            self.unreachable, self.back_at = False, self.clock()

    def holds(self) -> bool:
        """Whether expired leases and silent workers are left alone for now."""
        if self.unreachable or (self.back_at is not None
                                and self.clock() - self.back_at < self.lease_seconds):
            return True
        # A restart during this process's life, which it may not have seen (above).
        uptime = self.uptime(self.alias)
        return uptime is not None and uptime < min(self.lease_seconds,
                                                   time.monotonic() - self.started)
