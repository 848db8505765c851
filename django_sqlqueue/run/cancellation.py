"""Stopping a running attempt whose job was cancelled: the flag its code reads, the hooks that
cancel an async job's task, and the error the attempt is recorded with.

The worker learns of a request (``worker/cancels.py``) and calls :func:`request_stop` on the
job object the attempt runs with. From then on ``current_job().cancel_requested`` is True for
the job's code, and an async job's task is cancelled in its event loop (``CancelledError`` at
its current ``await``). Whatever the attempt then does, the runner records it as cancelled.
"""

import asyncio
import functools
import threading

from ..exceptions import JobCancelled

_lock = threading.Lock()  # request_stop runs on the worker's watcher thread, hooks on the job's


def request_stop(job, *, requested_at, by) -> None:
    """Flag ``job`` (the in-memory object its attempt runs with) as asked to stop, and run its
    stop hooks (an async job's task is cancelled)."""
    with _lock:
        job.cancel_requested_at = requested_at
        job.cancelled_by = by
        hooks = list(_hooks(job))
    for hook in hooks:
        hook()


def cancellable(job, function):
    """``function`` (a coroutine function) wrapped so that :func:`request_stop` on ``job``
    cancels the task that awaits it, from any thread."""

    @functools.wraps(function)
    async def run(*args, **kwargs):
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def stop():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop closed: the function already returned
                pass

        with _lock:
            _hooks(job).append(stop)
            already = getattr(job, "cancel_requested_at", None) is not None
        if already:
            task.cancel()
        try:
            return await function(*args, **kwargs)
        finally:
            with _lock:
                _hooks(job).remove(stop)

    return run


def stop_requested(job) -> bool:
    return getattr(job, "cancel_requested_at", None) is not None


def cancelled_error(job, detail: str = "") -> JobCancelled:
    """The error a cancelled attempt is recorded with: who asked, when, which attempt."""
    at = getattr(job, "cancel_requested_at", None)
    when = f" at {at.isoformat()}" if at is not None else ""
    who = getattr(job, "cancelled_by", None) or "someone"
    return JobCancelled(f"job {job.pk} was cancelled by {who}{when} while running attempt "
                        f"{job.attempts}{detail}")


def _hooks(job) -> list:
    return job.__dict__.setdefault("_sqlqueue_stop_hooks", [])
