"""``runworker --autoscale MIN:MAX``: what the supervisor asks every AUTOSCALE_INTERVAL_SECONDS.

``look(processes)`` measures the queues served (observability/fleet.py: the database's view of
every worker and host), estimates arrivals and completions since a look a window ago, and returns
the decision (observability/autoscale.py). The supervisor starts or retires processes on it.

Completions are the attempts the live workers report in their heartbeats (``Worker.jobs_done``,
each worker's increase while it stays alive); arrivals are completions plus the growth of the
due and running jobs. The window (at least a target wait, and three looks) spans a heartbeat or
more, so a burst of reports does not read as a burst of work.

Each change is also written to the ScaleEvent table (``record``: the admin dashboard shows each
supervisor's last changes); a change happens whether or not it could be written.

The supervisor may fork its children: it must hold no database connection then, so each look
and each record close the connections they opened, pools included (``after_look``).
"""

import collections
import os
import socket
import time
from dataclasses import dataclass

from django.db import router

from ..conf import get_settings
from ..models import Job, ScaleEvent
from ..observability import fleet
from ..observability.autoscale import ScalerState, ScaleSettings, decide
from .children import close_connections


@dataclass(frozen=True)
class Sample:
    at: float
    backlog: int  # due and running jobs
    done: dict  # live worker name -> attempts run


class Scaler:
    def __init__(self, *, settings: ScaleSettings, concurrency: int, queues, alias: str,
                 interval: float, measure=fleet.measure, clock=time.monotonic,
                 after_look=close_connections, host: str | None = None, record=None):
        self.settings = settings
        self.concurrency = concurrency  # this supervisor's --concurrency
        self.queues = queues  # None: every queue
        self.alias = alias
        self.interval = interval
        self.measure = measure
        self.clock = clock
        self.after_look = after_look
        self.host = host or socket.gethostname()  # of its children's Worker rows
        # record(**change): keeps a change (default: a ScaleEvent row in ``alias``).
        self.record = record or ScaleEvent.objects.db_manager(alias).record
        self.state = ScalerState()
        self.window = max(settings.target_wait, 3 * interval)
        self.samples: collections.deque = collections.deque()
        self.next_look = 0.0
        self.last = None  # the latest Decision
        self.reading = None  # the latest fleet.Fleet
        self.rates = (None, None)  # the latest (arrivals, completions) per second

    @classmethod
    def for_config(cls, config) -> "Scaler | None":
        """The scaler of ``runworker --autoscale`` (a ``WorkerConfig``), or None without it."""
        if not config.autoscale_range:
            return None
        conf = get_settings()
        minimum, maximum = config.autoscale_range
        return cls(settings=ScaleSettings(minimum=minimum, maximum=maximum,
                                          target_wait=conf.AUTOSCALE_TARGET_WAIT_SECONDS,
                                          cooldown=conf.AUTOSCALE_COOLDOWN_SECONDS),
                   concurrency=config.concurrency, queues=config.queues,
                   alias=config.database or router.db_for_write(Job),
                   interval=conf.AUTOSCALE_INTERVAL_SECONDS, host=config.host)

    def due(self) -> bool:
        return self.clock() >= self.next_look

    def look(self, processes: int):
        """Measure and decide for ``processes`` running now; returns the Decision."""
        now = self.clock()
        self.next_look = now + self.interval
        try:
            reading = self.measure(self.alias, self.queues)
        finally:
            self.after_look()
        self.reading = reading
        arrivals, completions = self.rates = self._rates(now, reading)
        measurements = reading.measurements(at=now, processes=processes,
                                            concurrency=self.concurrency, arrivals=arrivals,
                                            completions=completions)
        self.last = decide(measurements, self.settings, self.state)
        self.state = self.last.state
        return self.last

    def keep(self, processes_before: int, decision) -> None:
        """Write the change that ``decision`` makes from ``processes_before`` (ScaleEvent)."""
        try:
            self.record(host=self.host, pid=os.getpid(), processes_before=processes_before,
                        processes=decision.desired, action=decision.action,
                        reason=decision.reason)
        finally:
            self.after_look()

    def busy_pids(self) -> set:
        """The pids of this host's workers that ran a job at the last look."""
        busy = self.reading.busy if self.reading else ()
        return {pid for host, pid in busy if host == self.host}

    def _rates(self, now, reading) -> tuple:
        sample = Sample(now, reading.due + reading.running, reading.done)
        while len(self.samples) > 1 and now - self.samples[1].at >= self.window:
            self.samples.popleft()
        first = self.samples[0] if self.samples else None
        self.samples.append(sample)
        if first is None or now - first.at < self.window / 2:
            return None, None
        elapsed = now - first.at
        done = sum(max(n - first.done[name], 0) for name, n in sample.done.items()
                   if name in first.done)
        completions = done / elapsed
        arrivals = max(completions + (sample.backlog - first.backlog) / elapsed, 0.0)
        return arrivals, completions
