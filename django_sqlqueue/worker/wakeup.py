"""When the fetcher looks for jobs again: at once on a NOTIFY for one of its queues, an
in-process enqueue, or a freed slot; otherwise after the poll interval (+/-20% jitter, so that
many workers do not poll in lockstep). Polling always stays on: a notification is only a hint.

After a NOTIFY the fetcher also looks once more, ``notify.follow_up_seconds()`` later: a process
enqueueing fast sends only some of its notifications (enqueue/notify.py), and the jobs it enqueued
just after one it sent are found by this second look instead of the next poll.

Not every idle worker claims on a NOTIFY: PostgreSQL delivers it to every listener, and with N
workers serving its queue each one claims with chance ``CLAIMERS_PER_NOTIFY / N`` (``Claimers``),
so that about that many claims, not N, race for the job. Why: issue 18 measured, with 200 idle
workers on 2 cores, a pickup p50 of 305 ms, with every worker waking and claiming for each job.
The workers that draw no claim let the job be: one of the others takes it, and if none drew
one (a chance of about e**-CLAIMERS_PER_NOTIFY), their polls find it within a poll interval.
N counts the registered workers that serve the queue, busy or not, read every
``PEERS_REFRESH_SECONDS``; with 2 workers (or any number up to CLAIMERS_PER_NOTIFY) every one
claims, as before.

A worker that cannot LISTEN (MariaDB and SQLite have no NOTIFY; PostgreSQL behind a pooler with
no LISTEN_DATABASE) polls adaptively: after a claim that found jobs, the next polls come after
``FAST_POLL_SECONDS``, then twice that, and so on back up to the poll interval. Jobs that come
in a stream are then picked up within tens of milliseconds, while an idle worker still polls
once per interval. Measured on MariaDB (one worker polling every 1 s, jobs enqueued 0.05-1.5 s
apart): pickup p50 624 ms and p95 1032 ms before, see docs/databases.md for after.
"""

import logging
import random
import threading
import time

from django.db import connections

from ..conf import get_settings
from ..db import listening, ops
from ..enqueue.notify import CANCEL_CHANNEL, CHANNEL, follow_up_seconds, subscribe_in_process
from .resilience import Backoff

logger = logging.getLogger(__name__)
#: How often a worker counts the workers serving its queues (one SELECT of the worker table).
PEERS_REFRESH_SECONDS = 30.0
#: A polling worker's first wait after a claim that found jobs; each empty poll doubles it, up
#: to the poll interval.
FAST_POLL_SECONDS = 0.05


class Claimers:
    """Whether this worker claims on a NOTIFY for a queue: always with up to ``per_notify``
    workers serving it, otherwise with chance ``per_notify / workers``, so that about
    ``per_notify`` of them do. ``per_notify`` None: always."""

    def __init__(self, per_notify: int | None, *, rand=random.random):
        self.per_notify = per_notify
        self.rand = rand
        self._served_by: list = []  # each registered worker's queues ([] = every queue)

    def set_workers(self, queue_lists) -> None:
        """The queues of every registered worker (the worker table's ``queues`` column)."""
        self._served_by = [list(queues or []) for queues in queue_lists]

    def workers_serving(self, queues) -> int:
        return sum(1 for served in self._served_by
                   if not served or any(queue in served for queue in queues))

    def claims(self, queues) -> bool:
        if self.per_notify is None:
            return True
        workers = self.workers_serving(queues)
        return workers <= self.per_notify or self.rand() < self.per_notify / workers


class Wakeup:
    def __init__(self, *, alias: str, queues, poll_interval: float, use_notify: bool,
                 on_cancel=None):
        self.alias = alias
        self.on_cancel = on_cancel or (lambda: None)  # a NOTIFY that running jobs were cancelled
        self.queues = set(queues) if queues else None
        self.poll_interval = poll_interval
        self.event = threading.Event()
        driver = ops(connections[alias])
        self.listen = driver.listen  # used by the LISTEN thread: it opens its own connection
        self.use_notify = use_notify and driver.supports_notify
        self.no_listen_reason = None  # why NOTIFY is on but this worker polls
        self.listen_params = listening.listen_params(alias) if self.use_notify else None
        if self.use_notify and self.listen_params is None:
            self.use_notify = False
            self.no_listen_reason = listening.polling_reason(alias)
        self._stopping = threading.Event()
        self._listen_connection = None
        self.follow_up_seconds = follow_up_seconds() if self.use_notify else None
        self._follow_up_at = None  # monotonic time of the look due after a NOTIFY, if any
        self.claimers = Claimers(get_settings().CLAIMERS_PER_NOTIFY)
        self.peers_read_at = -float("inf")  # monotonic time the workers were last counted
        # Without NOTIFY: the wait before the next poll, shortened by found_jobs().
        self._next_poll_seconds = poll_interval
        self._started_at = None  # monotonic time of the first peers_due()
        subscribe_in_process(self.event)

    @property
    def mode(self) -> str:
        polling = f"polling every {self.poll_interval:g}s"
        if self.use_notify:
            return f"LISTEN/NOTIFY + {polling}"
        if self.no_listen_reason:
            return f"in-process + {polling} (no LISTEN: {self.no_listen_reason})"
        return f"in-process + {polling}"

    def start(self):
        if self.no_listen_reason:
            logger.warning("polling only, every %gs: %s", self.poll_interval,
                           self.no_listen_reason)
        if self.use_notify:
            threading.Thread(target=self._listen, name="sqlqueue-listen", daemon=True).start()

    def stop(self):
        self._stopping.set()
        self.event.set()

    def poke(self):
        self.event.set()

    def wait(self, timeout: float | None = None, *, at_most: float | None = None) -> bool:
        """Sleep until woken or for ``timeout`` (default: the poll interval, jittered +/-20%),
        never longer than ``at_most`` (a full claim due: claim/bounded.py). True if woken."""
        if timeout is None:
            timeout = self.next_poll()
            if self._follow_up_at is not None:
                timeout = max(0.0, min(timeout, self._follow_up_at - time.monotonic()))
        if at_most is not None:
            timeout = min(timeout, at_most)
        woken = self.event.wait(timeout)
        self.event.clear()
        if self._follow_up_at is not None and time.monotonic() >= self._follow_up_at:
            self._follow_up_at = None  # the claim after this wait is the second look
        return woken

    def next_poll(self, rand=random.uniform) -> float:
        """Seconds until the next poll: jittered so that many workers do not poll in step.
        Without NOTIFY, shorter while jobs keep coming (``found_jobs``)."""
        seconds = self.poll_interval
        if not self.use_notify:
            seconds = min(self._next_poll_seconds, self.poll_interval)
            self._next_poll_seconds = min(seconds * 2, self.poll_interval)
        return seconds * rand(0.8, 1.2)

    def found_jobs(self) -> None:
        """A claim found jobs: more may follow soon, so a polling worker looks again sooner."""
        if not self.use_notify:
            self._next_poll_seconds = min(FAST_POLL_SECONDS, self.poll_interval)

    # ---- LISTEN (the driver's) ----------------------------------------------------------------
    def _listen(self):
        backoff = Backoff(maximum=30.0)
        while not self._stopping.is_set():
            try:
                with self.listen(self.listen_params, [CHANNEL, CANCEL_CHANNEL]) as listening:
                    backoff.reset()
                    self.event.set()  # we may have missed notifications while away
                    self.on_cancel()
                    while not self._stopping.is_set():
                        for channel, payload in listening.wait(1.0):
                            if channel == CANCEL_CHANNEL:
                                self.on_cancel()
                            else:
                                self.notified(payload)
            except Exception as exc:
                if self._stopping.is_set():
                    return
                delay = backoff.next_delay()
                logger.warning("LISTEN connection lost (%s); reconnecting in %.1fs",
                               str(exc).strip() or type(exc).__name__, delay)
                self._stopping.wait(delay)

    def peers_due(self, clock=time.monotonic) -> bool:
        """Whether the workers serving this worker's queues should be counted again: every
        PEERS_REFRESH_SECONDS, and sooner while this worker is young (at 1, 2, 4... s), since
        workers started together register one after the other."""
        if not self.use_notify:
            return False
        now = clock()
        if self._started_at is None:
            self._started_at = now
        interval = min(PEERS_REFRESH_SECONDS, max(1.0, self.peers_read_at - self._started_at))
        return now - self.peers_read_at >= interval

    def set_peers(self, queue_lists, clock=time.monotonic) -> None:
        self.claimers.set_workers(queue_lists)
        self.peers_read_at = clock()

    def notified(self, payload: str) -> bool:
        """One NOTIFY (its payload: queue names, comma-separated): wake the fetcher if it is
        for a queue this worker serves and this worker drew a claim (``Claimers``). Returns
        whether it woke it."""
        queues = payload.split(",")
        if self.queues is not None:
            queues = [queue for queue in queues if queue in self.queues]
        wanted = bool(queues) and self.claimers.claims(queues)
        if wanted:
            if self.follow_up_seconds is not None:
                self._follow_up_at = time.monotonic() + self.follow_up_seconds
            self.event.set()
        return wanted
