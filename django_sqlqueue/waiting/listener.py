"""The waiters' LISTEN connection: one per process and jobs database, shared by every waiter.

A waiter on PostgreSQL sets its jobs' ``awaited``; the outcome write that gives such a job a
final status sends its id on ``FINISHED_CHANNEL`` (the driver's ``status_written``). This
module's thread LISTENs there and wakes the waiters of that id. It starts with the first
waiter and ends after ``IDLE_SECONDS`` without one, so a process that never waits holds no
connection, and one that waits holds one, however many requests wait at once.

A notification is a hint: waiters read the status themselves. While the thread is not
listening (starting, reconnecting) waiters poll as on a database without NOTIFY, and when it
starts listening it wakes them all, since a job may have ended before its LISTEN.
"""

import logging
import threading
import time

from ..db.base import FINISHED_CHANNEL

logger = logging.getLogger(__name__)

#: How long the thread keeps its connection with no waiter, for the next one to find it open.
IDLE_SECONDS = 60.0
#: Longest pause before connecting again after the LISTEN connection failed.
MAX_RECONNECT_SECONDS = 30.0


class Listener:
    """LISTEN on FINISHED_CHANNEL for the waiters of one database: ``listen`` is its driver's
    (``DatabaseDriver.listen``), ``params`` the client's connect arguments."""

    def __init__(self, params: dict, listen, *, idle_seconds: float = IDLE_SECONDS):
        self.params = params
        self.listen = listen
        self.idle_seconds = idle_seconds
        #: True while a LISTEN is in place: a waiter may then rely on being woken.
        self.listening = False
        self._lock = threading.Lock()
        self._waiters: dict[int, set] = {}  # job id -> wake callbacks
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def subscribe(self, pks, wake) -> None:
        """Call ``wake()`` (from the listener's thread) whenever one of ``pks`` may have ended;
        starts the thread if it is not running."""
        with self._lock:
            for pk in pks:
                self._waiters.setdefault(pk, set()).add(wake)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="sqlqueue-wait-listener")
                self._thread.start()

    def unsubscribe(self, pks, wake) -> None:
        with self._lock:
            for pk in pks:
                wakes = self._waiters.get(pk)
                if wakes is not None:
                    wakes.discard(wake)
                    if not wakes:
                        del self._waiters[pk]

    def woken(self, payload: str) -> None:
        """One notification: wake the waiters of the job it names."""
        try:
            pk = int(payload)
        except ValueError:
            return
        with self._lock:
            wakes = list(self._waiters.get(pk, ()))
        for wake in wakes:
            wake()

    def _wake_all(self) -> None:
        with self._lock:
            wakes = {wake for each in self._waiters.values() for wake in each}
        for wake in wakes:
            wake()

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread and close its connection now (before a database is dropped, at a
        test's end); waiters still waiting poll, and the next subscribe starts it again."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
        if thread is not None:
            thread.join(timeout)
        self._stop.clear()
        self.listening = False

    def _idle_ended(self, idle_since: float | None) -> tuple[bool, float | None]:
        """Whether the thread should end (stopped, or no waiter for idle_seconds); when it
        does, it is forgotten under the lock, so that the next subscribe starts another."""
        with self._lock:
            if self._stop.is_set():
                return True, idle_since
            if self._waiters:
                return False, None
            now = time.monotonic()
            idle_since = now if idle_since is None else idle_since
            if now - idle_since < self.idle_seconds:
                return False, idle_since
            if self._thread is threading.current_thread():
                self._thread = None
                self.listening = False
            return True, idle_since

    def _run(self) -> None:
        failures, idle_since = 0, None
        while True:
            try:
                with self.listen(self.params, [FINISHED_CHANNEL]) as listening:
                    failures = 0
                    self._wake_all()  # a job may have ended before the LISTEN
                    self.listening = True
                    while True:
                        for _, payload in listening.wait(1.0):
                            self.woken(payload)
                        ended, idle_since = self._idle_ended(idle_since)
                        if ended:
                            return
            except Exception as exc:  # noqa: BLE001 - any failure: reconnect, waiters poll
                self.listening = False
                self._wake_all()  # they poll until it is back
                failures += 1
                delay = min(MAX_RECONNECT_SECONDS, 0.1 * 2 ** failures)
                logger.warning("wait listener: LISTEN connection lost (%s); reconnecting "
                               "in %.1fs", str(exc).strip() or type(exc).__name__, delay)
                self._stop.wait(delay)
                ended, idle_since = self._idle_ended(idle_since)
                if ended:
                    return


_listeners: dict[str, Listener] = {}
_listeners_lock = threading.Lock()


def stop_all() -> None:
    """Stop every listener of this process (``Listener.stop``)."""
    with _listeners_lock:
        listeners = list(_listeners.values())
    for listener in listeners:
        listener.stop()


def shared(params: dict, listen) -> Listener:
    """This process's listener for the database ``params`` reach (``listen``: its driver's)."""
    key = repr(sorted(params.items()))
    with _listeners_lock:
        listener = _listeners.get(key)
        if listener is None:
            listener = _listeners[key] = Listener(params, listen)
        return listener
