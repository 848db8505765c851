"""The embedded worker: this process's one ``WorkerProcess``, run on a thread of its own beside
the server's, with everything ``runworker`` has (leases and heartbeats, maintenance, schedules,
the graceful stop that gives back what it cannot finish). Only the signals are the server's:
its hooks call ``start()`` and ``stop()``.

One per process: ``start()`` again returns the one running (a project may both use the gunicorn
hooks and serve ASGI through gunicorn's uvicorn worker). A forked child inherits none: threads
do not survive a fork, so a worker started before it (a preloading server) is not its own.
"""

import atexit
import functools
import logging
import os
import sys
import threading

from django.db import connections

from .. import checks
from ..worker.process import WorkerProcess
from ..worker.resilience import TRANSIENT, call_with_retry
from . import options

logger = logging.getLogger(__name__)
#: How long ``stop()`` waits past the shutdown timeout for the outcomes to be written and the
#: worker unregistered (each bounded at 5 s in worker/shutdown.py).
STOP_MARGIN_SECONDS = 15.0

_lock = threading.Lock()
_current: "EmbeddedWorker | None" = None


class EmbeddedWorker:
    def __init__(self, config, *, out=None):
        self.config = config
        self.process = WorkerProcess(config, out=out or sys.stdout)
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._run, name="sqlqueue-embedded", daemon=True)

    @property
    def worker_id(self) -> str:
        """Its name in the workers table (``Worker.name``, ``Job.claimed_by``)."""
        return self.process.worker_id

    def running(self) -> bool:
        return self.pid == os.getpid() and self.thread.is_alive()

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop claiming, let the running jobs finish within the shutdown timeout, give back the
        rest, unregister; True once done, False if ``timeout`` seconds were not enough (the
        jobs still held come back with their leases)."""
        self.process.signalled = True  # a stop, never a recycle
        self.process.stopping.set()
        self.process.wakeup.poke()
        if self.pid != os.getpid():
            return True  # a forked child: the thread ran in the parent, not here
        if timeout is None:
            timeout = self.config.shutdown_timeout + STOP_MARGIN_SECONDS
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def _run(self) -> None:
        alias = self.process.alias
        try:
            # As runworker does before it starts: without the tables it would only retry.
            # Waits out a database that is away, without holding up the server's start.
            problem = call_with_retry(
                functools.partial(checks.migrations_problem, alias), alias=alias,
                what="reading the applied migrations", stop=self.process.stopping.is_set)
            if problem is not None:
                logger.error("embedded worker not started: %s", problem)
                return
            self.process.run()
        except TRANSIENT:
            pass  # stopped while the database was away: nothing was claimed
        except Exception:
            # The web process serves on: its requests need not share the worker's trouble. The
            # health view's liveness says so (the worker's row is gone or stale).
            logger.exception("embedded worker stopped by an error")
        finally:
            connections.close_all()  # this thread's connections


def start(**overrides) -> EmbeddedWorker | None:
    """Start this process's embedded worker if ``SQLQUEUE["EMBEDDED_WORKER"]`` is on, and return
    it (the one already running, if any); None if the setting is off. ``overrides``:
    ``WorkerConfig`` fields over the setting's. Returns at once: the worker registers and
    claims on its thread."""
    global _current
    if not options.enabled():
        return None
    with _lock:
        if _current is not None and _current.running():
            return _current
        config = options.worker_config(**overrides)
        _current = EmbeddedWorker(config)
        _current.start()
        # Servers whose exit no hook sees (runserver) still stop it gracefully; after a hook's
        # stop(), a no-op.
        _at_exit(stop)
        return _current


def stop(timeout: float | None = None) -> bool:
    """Stop this process's embedded worker gracefully (``EmbeddedWorker.stop``); True if none
    runs."""
    with _lock:
        worker = _current
    if worker is None or worker.pid != os.getpid():
        return True
    return worker.stop(timeout)


def _at_exit(fn) -> None:
    """Call ``fn`` as the interpreter exits, before it joins its threads. ``atexit`` is too late:
    by then ``concurrent.futures`` refuses work (its own exit hook ran), and the worker's event
    loop needs it to close its connections. ``threading._register_atexit`` (since Python 3.9,
    what concurrent.futures itself uses) runs first; tests/process/test_embedded_worker.py's
    runserver tests pin it."""
    register = getattr(threading, "_register_atexit", None)
    if register is None:
        atexit.register(fn)
        return
    try:
        register(fn)
    except RuntimeError:
        pass  # the interpreter is exiting already


def current() -> EmbeddedWorker | None:
    """This process's running embedded worker, or None."""
    worker = _current
    return worker if worker is not None and worker.running() else None
