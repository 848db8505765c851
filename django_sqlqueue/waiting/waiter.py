"""Block or await until jobs finish: ``wait`` and its async twin ``await_``.

Each wait reads whether any of its jobs is unfinished (one read by primary key), and reads
again when woken:

- on PostgreSQL with NOTIFY (``sends_notify``) and a connection that can LISTEN
  (``db.listening.listen_params``: not through a transaction pooler without
  ``LISTEN_DATABASE``), by the process's listener (listener.py), once it marked its jobs
  ``awaited`` so that their final outcome write notifies; and every ``WAIT_POLL_MAX_SECONDS``
  still, for the ends that send no NOTIFY (a queued job cancelled or expired, a workflow's job
  cancelled with its parent);
- elsewhere, and for a job not marked yet, by an adaptive poll: after
  ``WAIT_POLL_MIN_SECONDS``, then twice as long each time up to ``WAIT_POLL_MAX_SECONDS``.

A job is marked only once no claim can take it (running, or waiting for its parents): the mark
is an UPDATE, and its row lock, however short, makes a claim at that instant (FOR UPDATE SKIP
LOCKED) pass a ready job by until the worker's next look (measured: pickup p95 103 ms with
waiters marking at once, 5 ms without). A ready job is polled until a worker takes it.

The order makes a lost wake-up impossible: the waiter subscribes, marks, then reads; an outcome
committed before the mark is seen by the read, one committed after it notifies.
"""

import asyncio
import math
import threading
import time

from django.db import connections

from ..conf import get_settings
from ..db import ops
from ..db.listening import listen_params
from ..enqueue.notify import sends_notify
from ..exceptions import WaitTimeout
from ..statuses import FINISHED_STATUSES, JobStatus
from . import listener as listeners


def check_timeout(timeout) -> float:
    """The timeout in seconds (None: no limit), or a clear error."""
    if timeout is None:
        return math.inf
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be a number of seconds, or None to wait without a "
                        f"limit; got {timeout!r}.")
    if math.isnan(timeout) or timeout < 0:
        raise ValueError(f"timeout must be 0 or more seconds (0: only look), or None to wait "
                         f"without a limit; got {timeout!r}.")
    return float(timeout)


class Poll:
    """How long a waiter sleeps before it reads again."""

    def __init__(self):
        settings = get_settings()
        self.shortest = settings.WAIT_POLL_MIN_SECONDS
        self.longest = settings.WAIT_POLL_MAX_SECONDS
        self._next = self.shortest

    def next_seconds(self, *, listening: bool) -> float:
        if listening:
            return self.longest
        seconds = self._next
        self._next = min(seconds * 2, self.longest)
        return seconds


def listener_for(alias: str):
    """The listener that wakes waiters of jobs on ``alias``, or None where they poll."""
    if not sends_notify(connections[alias]):
        return None
    params = listen_params(alias)
    return None if params is None else listeners.shared(params, ops(connections[alias]).listen)


def _jobs(model, alias, pks):
    return model._default_manager.using(alias).filter(pk__in=pks)


def _unfinished(model, alias, pks):
    return _jobs(model, alias, pks).exclude(status__in=FINISHED_STATUSES)


#: The unfinished statuses in which no claim can take a job, so that marking it locks out no
#: worker (see the module's docstring).
MARKABLE = (JobStatus.RUNNING, JobStatus.WAITING)


def _look(model, alias, pks) -> list:
    """(id, status, awaited) of each unfinished job of ``pks``: one read by primary key."""
    return list(_unfinished(model, alias, pks).values_list("pk", "status", "awaited"))


def _to_mark(rows) -> list:
    return [pk for pk, status, awaited in rows if not awaited and status in MARKABLE]


def _mark(model, alias, pks):
    """Have the final outcome of each job notify (once per job: never cleared), if no claim
    can take it now."""
    return _jobs(model, alias, pks).filter(status__in=MARKABLE, awaited=False)


def _sleep_seconds(rows, poll: "Poll", listener) -> float:
    """Every job marked and the listener up: only a NOTIFY (or the long poll) is worth waking
    for; else the adaptive poll."""
    listening = (listener is not None and listener.listening
                 and all(awaited for _, _, awaited in rows))
    return poll.next_seconds(listening=listening)


def _timed_out(pks, timeout) -> WaitTimeout:
    what = f"job {pks[0]}" if len(pks) == 1 else f"jobs {', '.join(map(str, pks))}"
    return WaitTimeout(f"{what} did not finish within {timeout:g}s; it goes on: wait again, "
                       "or cancel it.")


def wait(model, alias: str, pks, *, timeout) -> None:
    """Return once every job of ``pks`` on ``alias`` has a final status (or is gone); raise
    ``WaitTimeout`` after ``timeout`` seconds (None: no limit). Outside a transaction only:
    inside one, the job's end would never be seen (on MariaDB) and its start never committed."""
    seconds = check_timeout(timeout)
    pks = list(pks)
    if connections[alias].in_atomic_block:
        raise RuntimeError("wait_finished() inside transaction.atomic(): a job enqueued in "
                           "this transaction cannot run before it commits. Wait after the "
                           "commit (outside the atomic block).")
    deadline = time.monotonic() + seconds
    listener = listener_for(alias)
    woken = threading.Event()
    if listener is not None:
        listener.subscribe(pks, woken.set)
    try:
        poll = Poll()
        while True:
            woken.clear()
            rows = _look(model, alias, pks)
            if not rows:
                return
            marks = _to_mark(rows) if listener is not None else None
            if marks:
                _mark(model, alias, marks).update(awaited=True)
                continue  # read again: an outcome committed before the mark did not notify
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timed_out(pks, seconds)
            woken.wait(min(_sleep_seconds(rows, poll, listener), remaining))
    finally:
        if listener is not None:
            listener.unsubscribe(pks, woken.set)


async def await_(model, alias: str, pks, *, timeout) -> None:
    """``wait``'s async twin: the reads go through Django's async ORM, the sleeps are the event
    loop's, so the loop is never blocked."""
    seconds = check_timeout(timeout)
    pks = list(pks)
    deadline = time.monotonic() + seconds
    listener = listener_for(alias)
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake():  # from the listener's thread
        loop.call_soon_threadsafe(woken.set)

    if listener is not None:
        listener.subscribe(pks, wake)
    try:
        poll = Poll()
        while True:
            woken.clear()
            rows = [row async for row in
                    _unfinished(model, alias, pks).values_list("pk", "status", "awaited")]
            if not rows:
                return
            marks = _to_mark(rows) if listener is not None else None
            if marks:
                await _mark(model, alias, marks).aupdate(awaited=True)
                continue  # read again: an outcome committed before the mark did not notify
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timed_out(pks, seconds)
            try:
                await asyncio.wait_for(woken.wait(),
                                       min(_sleep_seconds(rows, poll, listener), remaining))
            except TimeoutError:
                pass
    finally:
        if listener is not None:
            listener.unsubscribe(pks, wake)
