"""``wait_until``: the suite's one way to wait for something to happen.

A test that waits on another thread or process polls a condition until it holds, with a deadline
and a failure that names what it waited for::

    wait_until(lambda: job_status(job.pk) == "succeeded", what="the job to succeed",
               worker=worker)

``wait_started(pk, worker)`` waits for a job of the test app to begin (its first row tagged
"started").
"""

import time

from django.db import connections


class StopWaiting(Exception):  # noqa: N818 - a signal to wait_until, not an error of its own
    """Raised by a condition that can no longer come true (a worker it needs has exited):
    ``wait_until`` fails at once with its message instead of waiting out the deadline."""


# The default deadline: what a test waits for happens in well under a second on a quiet machine,
# but CI runs three passes at once on two cores, where a worker subprocess has been seen to take
# ten times as long (a recycled child's start included). The deadline only bounds a failure.
DEFAULT_TIMEOUT = 60.0


def wait_until(condition, *, what, timeout=DEFAULT_TIMEOUT, interval=0.05, worker=None,
               context=None):
    """Poll ``condition()`` until it returns something truthy, and return that.

    Each poll starts on fresh database connections (this thread's, unless a transaction is open
    on one): it reads what other processes have committed since, and it survives a database
    server restarted between polls. An exception from ``condition`` (the server restarting, a row
    not written yet) counts as "not yet"; ``StopWaiting`` fails at once.

    After ``timeout`` seconds, an AssertionError says what was awaited (``what``: "the job to
    succeed"), the last exception if any, ``context()``'s text, and the output of ``worker``
    (a WorkerProcess or a list of them).
    """
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        _fresh_connections()
        try:
            value = condition()
        except StopWaiting as stop:
            raise AssertionError(f"gave up waiting for {what}: {stop}") from None
        except Exception as exc:  # noqa: BLE001 - reported if the wait times out
            value, last_error = None, exc
        if value:
            return value
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    message = f"timed out after {timeout:g}s waiting for {what}"
    if last_error is not None:
        message += f"\nlast error: {type(last_error).__name__}: {last_error}"
    if context is not None:
        message += f"\n{context()}"
    workers = worker if isinstance(worker, list | tuple) else [worker] if worker else []
    for each in workers:
        message += f"\nworker output:\n{each.output}"
    raise AssertionError(message)


def _fresh_connections():
    """Close this thread's database connections, but none inside a transaction (a test case's
    own, which closing would break)."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


def wait_started(pk, worker=None, *, timeout=DEFAULT_TIMEOUT):
    """Wait until job ``pk`` has started: the test app's tasks write an Execution row tagged
    "started" as they begin, so this is the job's function running, not only its claim."""
    # A model, imported here: this module is imported by conftest files before Django is set up.
    from tests.testapp.models import Execution

    wait_until(lambda: Execution.objects.filter(job_id=pk, tag="started").exists(),
               what=f"job {pk} to start", worker=worker, timeout=timeout)
