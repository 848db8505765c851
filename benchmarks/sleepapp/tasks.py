"""One job per system that records its start, waits ``SLEEP_SECONDS`` and records its end
(``benchmarks/async_sleep.py``): ``await asyncio.sleep()`` where the system runs ``async def``
jobs (django-sqlqueue, procrastinate; pgqueuer's entrypoint is in async_sleep_systems.py), and
``time.sleep()`` for Celery, which has no async tasks: what a prefork child does, and what the
gevent pool turns into a cooperative wait (it patches ``time.sleep``)."""

import asyncio
import os
import time

SYSTEM = os.environ.get("BENCH_SYSTEM")
SLEEP_SECONDS = 0.1


def record(key, phase: str) -> None:
    """Appends ``key phase time`` to BENCH_SLEEP_FILE: one ``write()`` of a short line in append
    mode, so lines of concurrent jobs and processes never interleave."""
    path = os.environ.get("BENCH_SLEEP_FILE")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, f"{key} {phase} {time.time():.6f}\n".encode())
        finally:
            os.close(fd)


async def asleep(key):
    record(key, "start")
    await asyncio.sleep(SLEEP_SECONDS)
    record(key, "end")


def sleep(key):
    record(key, "start")
    time.sleep(SLEEP_SECONDS)
    record(key, "end")


if SYSTEM == "sqlqueue":
    from django_sqlqueue import job

    sleep_job = job(asleep)
    # autoscale_bursty.py's job: a thread held for 100 ms (a slow query, a blocking call).
    blocking_sleep_job = job(sleep)

elif SYSTEM == "procrastinate":
    from procrastinate.contrib.django import app

    sleep_job = app.task(name="sleep")(asleep)

elif SYSTEM in ("celery", "celery_solo"):
    from benchmarks.celery_app import app

    sleep_job = app.task(name="sleep")(sleep)
