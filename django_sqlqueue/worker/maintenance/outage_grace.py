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

A connection of this process that died while the server kept answering is not an outage here:
no grace (``outages.reachable`` says which).
"""

import time

from django.db import InterfaceError, OperationalError

from ...db import outages

CONNECTION_ERRORS = (OperationalError, InterfaceError)


class OutageGrace:
    def __init__(self, *, alias: str, lease_seconds: float, clock=time.monotonic,
                 reachable=outages.reachable):
        self.alias = alias
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.reachable = reachable
        self.unreachable = False  # observed unreachable, not answered since
        self.back_at = None  # self.clock() when the database answered again

    def failed(self, error: BaseException) -> None:
        """A pass failed with ``error``: an outage if the database cannot be reached now."""
        if isinstance(error, CONNECTION_ERRORS) and not self.reachable(self.alias):
            self.unreachable = True

    def answered(self) -> None:
        """A statement of this pass went through: the database is back, if it was away."""
        if self.unreachable:
            self.unreachable, self.back_at = False, self.clock()

    def holds(self) -> bool:
        """Whether expired leases and silent workers are left alone for now."""
        return self.unreachable or (self.back_at is not None
                                    and self.clock() - self.back_at < self.lease_seconds)
