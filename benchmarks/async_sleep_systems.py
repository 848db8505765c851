"""The async-sleep benchmark's side inside each system's virtualenv (``benchmarks/async_sleep.py``
runs it): set up the system's database, start ONE worker process at the system's documented async
concurrency, enqueue the jobs at once, and print what the jobs recorded as JSON.

    python -m benchmarks.async_sleep_systems VARIANT CONFIG_JSON
    python -m benchmarks.async_sleep_systems --pgqueuer-worker   (pgqueuer's worker process)

Each variant reuses its system's driver (``systems/<name>.py``) for the schema, the reset and the
queue's count, and adds the enqueue of the sleep jobs (``sleepapp/tasks.py``) and the worker.
"""

import asyncio
import contextlib
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from . import processes

#: The variant -> its system's driver module (benchmarks/systems/).
VARIANTS = {
    "sqlqueue": "sqlqueue",
    "procrastinate": "procrastinate",
    "pgqueuer": "pgqueuer",
    "celery_prefork": "celery",
    "celery_gevent": "celery",
}
SETTINGS = "benchmarks.sleep_settings"


def _env(system: str, dsn: str) -> dict:
    return {"BENCH_SYSTEM": system, "BENCH_DSN": dsn, "DJANGO_SETTINGS_MODULE": SETTINGS,
            "PYTHONPATH": str(processes.ROOT)}


def _django(system: str, dsn: str) -> None:
    """Django with the sleep app installed, before the system's driver sets it up (its own
    ``django.setup()`` then finds the settings configured and the apps ready)."""
    os.environ.update(_env(system, dsn))
    import django

    django.setup()


class Variant:
    def __init__(self, name: str, dsn: str, logdir: Path, concurrency: int):
        self.name, self.dsn, self.concurrency = name, dsn, concurrency
        system = VARIANTS[name]
        if system != "pgqueuer":
            _django(system, dsn)
        self.system = importlib.import_module(f"benchmarks.systems.{system}").System(dsn, logdir)
        self.env = _env(system, dsn)
        if system != "pgqueuer":
            from benchmarks.sleepapp import tasks

            self.task = tasks.sleep_job

    def worker_argv(self) -> list:
        """One worker process, as each project documents its async (or green) concurrency."""
        python, n = sys.executable, str(self.concurrency)
        if self.name == "sqlqueue":  # async jobs on the process's event loop
            return [python, "-m", "django", "runworker", "--verbosity", "0",
                    "--async-concurrency", n]
        if self.name == "procrastinate":  # async jobs at once on its loop
            return [python, "-m", "django", "procrastinate", "worker", "--concurrency", n]
        if self.name == "pgqueuer":  # pgqueuer.run(max_concurrent_tasks=n)
            return [python, "-m", "benchmarks.async_sleep_systems", "--pgqueuer-worker", n]
        celery = [python, "-m", "celery", "-A", "benchmarks.celery_app", "worker",
                  "--loglevel", "WARNING"]
        if self.name == "celery_gevent":
            return [*celery, "--pool", "gevent", "--concurrency", n]
        return celery  # prefork, its default concurrency (one child per core)

    def enqueue(self, keys) -> None:
        """Every job at once, with the system's bulk API, in one transaction where it has one."""
        if self.name == "pgqueuer":
            self.system.queries.enqueue(["sleep"] * len(keys),
                                        [str(k).encode() for k in keys], [0] * len(keys))
            return
        if self.name.startswith("celery"):
            from celery import group

            group(self.task.s(k) for k in keys).apply_async()
            return
        from django.db import transaction

        with transaction.atomic():
            if self.name == "sqlqueue":
                from django_sqlqueue.models import Job

                Job.objects.bulk_enqueue([self.task.prepare(k) for k in keys])
            else:
                self.task.batch_defer(*({"key": k} for k in keys))


def _read(path: str) -> dict:
    """{phase: {key: time}} from the jobs' lines (a job run twice keeps its first times)."""
    seen = {"start": {}, "end": {}}
    for line in Path(path).read_text().splitlines():
        key, phase, at = line.split()
        seen[phase].setdefault(int(key), float(at))
    return seen


def measure(variant: Variant, n: int, cap: float, logdir: Path) -> dict:
    """Idle worker, then ``n`` jobs enqueued at once; wait = a job's start - the enqueue's
    return (the pickup scenario's rule), jobs/s = n / (the last end - the enqueue's start)."""
    fd, path = tempfile.mkstemp(prefix="sleep-", suffix=".txt")
    os.close(fd)
    os.chmod(path, 0o666)
    variant.system.reset()
    workers = processes.Workers(
        [(variant.worker_argv(), {**variant.env, "BENCH_SLEEP_FILE": path})], logdir,
        variant.name)
    try:
        warm = list(range(-5, 0))  # the worker is up once these ran; then it falls idle
        variant.enqueue(warm)
        deadline = time.monotonic() + 90
        while len(_read(path)["end"]) < len(warm):
            if time.monotonic() > deadline or not workers.alive():
                raise RuntimeError(f"the worker did not run the warm-up jobs; see {logdir}")
            time.sleep(0.1)
        time.sleep(2.0)
        in_tree = len(processes.tree_pids(workers.pids))
        started = time.time()
        variant.enqueue(list(range(n)))
        committed = time.time()
        deadline = time.monotonic() + cap
        while time.monotonic() < deadline and workers.alive():
            if sum(1 for k in _read(path)["end"] if k >= 0) >= n:
                break
            time.sleep(0.1)
    finally:
        workers.stop()
    seen = _read(path)
    os.unlink(path)
    starts = [at for key, at in seen["start"].items() if key >= 0]
    ends = [at for key, at in seen["end"].items() if key >= 0]
    waits = [(at - committed) * 1000 for at in starts]
    last = max(ends) if ends else committed
    return {
        "n": n, "done": len(ends), "completed": len(ends) >= n,
        "enqueue_seconds": committed - started, "seconds": last - started,
        "jobs_per_s": len(ends) / (last - started) if ends else None,
        "wait_p50_ms": processes.percentile(waits, 50),
        "wait_p95_ms": processes.percentile(waits, 95),
        "wait_max_ms": max(waits) if waits else None,
        "concurrency": variant.concurrency, "processes_in_tree": in_tree,
    }


def main(argv) -> int:
    if argv[0] == "--pgqueuer-worker":
        import pgqueuer

        asyncio.run(pgqueuer.run(f"{__name__}:create_pgqueuer",
                                 max_concurrent_tasks=int(argv[1])))
        return 0
    name, config = argv[0], json.loads(argv[1])
    logdir = Path(config["logdir"])
    logdir.mkdir(parents=True, exist_ok=True)
    variant = Variant(name, config["dsn"], logdir, config["concurrency"])
    variant.system.setup()
    result = {"variant": name, "version": variant.system.version(),
              **measure(variant, config["n"], config["cap_s"], logdir)}
    variant.system.close()
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


@contextlib.asynccontextmanager
async def create_pgqueuer():
    """pgqueuer's worker: the sleep entrypoint, an ``async def``, its concurrency unlimited per
    entrypoint (the worker's cap is ``max_concurrent_tasks``)."""
    import asyncpg
    from pgqueuer import PgQueuer
    from pgqueuer.db import AsyncpgDriver

    from benchmarks.sleepapp import tasks

    connection = await asyncpg.connect(os.environ["BENCH_DSN"])
    pgq = PgQueuer(AsyncpgDriver(connection))

    @pgq.entrypoint("sleep")
    async def sleep(job):
        await tasks.asleep(int(job.payload.decode()))

    try:
        yield pgq
    finally:
        await connection.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
