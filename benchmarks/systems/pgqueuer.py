"""PgQueuer (asyncio, asyncpg), with default options. Workers run ``pgqueuer.run(factory)``, the
Python entry point that ``pgq run`` wraps (in pgqueuer 1.6.0 with the typer that pip picks today,
``pgq run`` fails at start-up in its log-level option parsing).

Enqueue uses its synchronous API (``SyncQueries`` over a psycopg connection in autocommit), the
way a Django view would call it: PgQueuer does not use Django's connection, so its enqueue
cannot join the transaction of the request's own writes.
"""

import asyncio
import contextlib
import os
import sys

import psycopg

from .. import harness, processes

NAME = "pgqueuer"


class System(harness.System):
    name = NAME
    label = "pgqueuer"
    notes = [
        "pgqueuer: enqueues on its own autocommit connection (not in a Django transaction); "
        "finished jobs are deleted from the queue table (a log table keeps statistics), so "
        "the claim-time scenario does not apply.",
    ]

    def __init__(self, dsn, logdir):
        super().__init__(dsn, logdir)
        from pgqueuer.db import SyncPsycopgDriver
        from pgqueuer.queries import SyncQueries

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.queries = SyncQueries(SyncPsycopgDriver(self.conn))

    def version(self):
        from importlib.metadata import version

        return version("pgqueuer")

    def setup(self):
        import asyncpg
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.queries import Queries

        async def install():
            conn = await asyncpg.connect(self.dsn)
            try:
                await Queries(AsyncpgDriver(conn)).install()
            finally:
                await conn.close()

        asyncio.run(install())

    def reset(self):
        self.conn.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")

    def unfinished_sql(self):
        return "SELECT count(*) FROM pgqueuer"

    has_autocommit_enqueue = True

    def enqueue_one(self, i):
        self.queries.enqueue("noop", str(i).encode())

    def enqueue_one_autocommit(self, i):
        self.enqueue_one(i)  # always on its own autocommit connection

    def bulk_enqueue(self, n):
        batch = 10_000
        for start in range(0, n, batch):
            size = min(n, start + batch) - start
            self.queries.enqueue(
                ["noop"] * size, [str(i).encode() for i in range(start, start + size)], [0] * size
            )

    def enqueue_pickup(self, key):
        self.queries.enqueue("pickup", str(key).encode())

    def worker_specs(self, count):
        argv = [sys.executable, "-m", "benchmarks.systems.pgqueuer"]
        env = {"PYTHONPATH": str(processes.ROOT), "BENCH_DSN": self.dsn}
        return [(argv, env) for _ in range(count)]

    def close(self):
        self.conn.close()


@contextlib.asynccontextmanager
async def create_pgqueuer():
    """The factory ``pgq run`` calls in each worker process."""
    import asyncpg
    from pgqueuer import PgQueuer
    from pgqueuer.db import AsyncpgDriver

    connection = await asyncpg.connect(os.environ["BENCH_DSN"])
    pgq = PgQueuer(AsyncpgDriver(connection))

    @pgq.entrypoint("noop")
    async def noop(job):
        return None

    @pgq.entrypoint("pickup")
    async def pickup(job):
        processes.record_pickup(int(job.payload.decode()))

    try:
        yield pgq
    finally:
        await connection.close()


if __name__ == "__main__":
    import pgqueuer

    asyncio.run(pgqueuer.run("benchmarks.systems.pgqueuer:create_pgqueuer"))
