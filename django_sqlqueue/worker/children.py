"""How the supervisor starts a worker process: a fork of itself, or a fresh interpreter.

A fork starts working at once: Django, the project's settings and apps are already imported and
set up (about a second of CPU per process otherwise, paid again at every restart). It is safe
only while the supervisor holds no database connection and runs no other thread, both of which
a child would share in a broken state; :func:`fork_blocker` checks that before the first fork.
A fresh interpreter runs the same command line with ``--processes 1 --supervised``.
"""

import gc
import os
import signal
import subprocess
import sys
import threading
import traceback

from django.db import connections

#: What ``--start-method`` accepts; the default is the first that this platform allows.
START_METHODS = ("fork", "spawn")


def default_start_method() -> str:
    """``fork`` on Linux. macOS has ``fork()`` too, but its system libraries are not safe to use
    in a forked child; elsewhere there is none."""
    return "fork" if sys.platform.startswith("linux") else "spawn"


def close_connections() -> None:
    """Close this process's database connections, and their pools: a forked child would share
    their sockets (and a pool's threads would not be there)."""
    for connection in connections.all(initialized_only=True):
        connection.close()
        if connection.alias in getattr(type(connection), "_connection_pools", {}):
            connection.close_pool()  # its threads and sockets would be the child's too


def fork_blocker() -> str | None:
    """Close this process's database connections (and pools), then say why forking is still
    unsafe, or None."""
    close_connections()
    if not hasattr(os, "fork"):
        return "this platform cannot fork"
    others = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    if others:
        return f"threads are running in this process ({', '.join(others)})"
    return None


def spawn(argv: list) -> subprocess.Popen:
    return subprocess.Popen(argv)


def fork(run_worker) -> "ForkedChild":
    """Fork; the child calls ``run_worker()`` and exits with the code it returns, never
    returning here (the supervisor's loop must not run twice)."""
    _flush()
    gc.freeze()  # keep the objects already made out of the child's collections: fewer copied pages
    # No SIGTERM may reach the child before it drops the supervisor's handlers.
    blocked = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
        raise
    if pid:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
        return ForkedChild(pid)
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
        code = run_worker()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            connections.close_all()  # say goodbye to PostgreSQL: os._exit() would just drop them
        except Exception:  # noqa: BLE001 - exiting anyway; the server notices a dropped socket
            pass
        _flush()
        os._exit(code)


class ForkedChild:
    """The part of ``subprocess.Popen`` the supervisor uses, for a forked child."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode = None

    def poll(self):
        """The exit code (minus the signal number if a signal killed it), or None if running."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, signum):
        if self.poll() is None:  # never signal a pid that may have been reused
            os.kill(self.pid, signum)

    def kill(self):
        self.send_signal(signal.SIGKILL)


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing to duplicate
            pass
