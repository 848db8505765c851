"""Chancy (PostgreSQL, psycopg 3, asyncio), every option at its default: one ``chancy worker start``
process (Chancy's own command), the queue declared as ``Queue("default")``, so its jobs run in
Chancy's default executor, a process pool with one process per core (2 here, our worker process
count), LISTEN/NOTIFY on, a 5 s poll.

Enqueue: ``Chancy.sync_push()``, the synchronous API Chancy documents for code that is not asyncio,
on Chancy's own connection pool (autocommit): it cannot join a Django transaction.
"""

import asyncio
import os
import sys
from pathlib import Path

from .. import harness, processes

NAME = "chancy"
TABLE = "chancy_jobs"


def noop(i=0):
    return None


def pickup(key):
    processes.record_pickup(key)


def make_app():
    """The app ``chancy --app benchmarks.systems.chancy.make_app`` runs."""
    from chancy import Chancy

    return Chancy(os.environ["BENCH_DSN"])


class System(harness.System):
    name = NAME
    label = "Chancy"
    notes = [
        "Chancy: one `chancy worker start` process with Chancy's defaults (a process pool of one "
        "process per core, 2), enqueue with `sync_push()` on its own connection pool "
        "(autocommit, not in a Django transaction); bulk is `sync_push_many()`. With a "
        "pre-filled queue its worker pulls at most its concurrency (2) jobs per poll and polls "
        "every 5 s unless a push notifies it (its log's 'Pulled' lines), hence its drain rate.",
    ]
    has_autocommit_enqueue = True

    def __init__(self, dsn, logdir):
        super().__init__(dsn, logdir)
        os.environ["BENCH_DSN"] = dsn
        from chancy import Job

        self.app = make_app()
        self.noop = Job.from_func(noop)
        self.pickup = Job.from_func(pickup)

    def version(self):
        from importlib.metadata import version

        return version("chancy")

    def setup(self):
        from chancy import Queue

        async def install():
            async with self.app:
                await self.app.migrate()
                await self.app.declare(Queue("default"))

        asyncio.run(install())

    def reset(self):
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"TRUNCATE {TABLE}")  # noqa: S608

    def unfinished_sql(self):
        return (f"SELECT count(*) FROM {TABLE} "  # noqa: S608
                "WHERE state IN ('pending', 'running', 'retrying')")

    def enqueue_one(self, i):
        self.app.sync_push(self.noop.with_kwargs(i=i))

    def enqueue_one_autocommit(self, i):
        self.enqueue_one(i)

    def bulk_enqueue(self, n):
        jobs = [self.noop.with_kwargs(i=i) for i in range(n)]
        for _ in self.app.sync_push_many(jobs, batch_size=10_000):
            pass

    def enqueue_pickup(self, key):
        self.app.sync_push(self.pickup.with_kwargs(key=key))

    def worker_specs(self, count):
        chancy = str(Path(sys.executable).parent / "chancy")  # the command Chancy installs
        argv = [chancy, "--app", "benchmarks.systems.chancy.make_app", "worker", "start"]
        env = {"PYTHONPATH": str(processes.ROOT), "BENCH_DSN": self.dsn}
        return [(argv, env)]

    def close(self):
        self.app.sync_pool.close()
