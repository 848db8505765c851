"""Oban for Python (``oban``, asyncio, psycopg 3), with default options but two: workers are
``oban start --queues default:10 --log-level WARNING --cron-modules benchmarks.systems.oban``,
Oban's own CLI, one process per worker process (2), each with its default connection pool
(1-10 connections), LISTEN/NOTIFY notifier, 1 s stager, leadership, pruner and lifeline.

- Concurrency: Oban runs only the queues it is given, so ``--queues`` is required; 10 is the
  limit of every queue example in Oban's docs and the ``limit`` default of its producer. A limit
  is per process (asyncio tasks in one event loop), so the two processes run up to 20 jobs at once.
- ``--log-level WARNING``: at the CLI's default (INFO) every job writes a start and a stop log
  line; the other drivers here silence per-job logging alike (Celery ``--loglevel WARNING``, RQ
  and django-sqlqueue ``--verbosity 0``).
- ``--cron-modules``: without it, ``oban start`` greps the whole working directory (here the
  checkout, virtualenvs included) for cron workers at every start; naming the module that holds
  our workers skips that scan (there are no cron workers).

Enqueue: Oban's API is asyncio only, so the driver keeps one event loop (``asyncio.Runner``, the
standard loop) and a client-mode ``Oban(pool=await Oban.create_pool(dsn))``, the "web app" setup
of Oban's quickstart (not started: an enqueuing process runs no queue). ``enqueue_one`` is Oban's
documented transactional insertion with psycopg: a connection from that pool,
``conn.transaction()``, and ``oban.enqueue(Noop.new(args), conn=conn)`` (BEGIN, one INSERT ...
RETURNING with its pg_notify, COMMIT; the same statements as ``oban.enqueue(job)`` without
``conn``, which commits the pool connection it takes).
It runs on Oban's own pool, not Django's connection: it cannot join a Django transaction.
``enqueue_one_autocommit`` passes an autocommit psycopg connection as ``conn``: one INSERT, no
transaction block. Bulk is ``oban.enqueue_many()``: in oban 0.7 (without Oban Pro) it sends one
INSERT per job, in one transaction per call (10,000 jobs per call here).

Finished jobs stay in ``oban_jobs`` (state ``completed``, pruned after a day), so the claim-time
scenario applies: it times Oban's own claim, the query a queue's producer runs
(``fetch_jobs.sql``, through Oban's internal query object) for one job at a time.
"""

import asyncio
import os
import socket
import sys
from pathlib import Path

from oban import Oban, worker

from .. import harness, processes

NAME = "oban"
QUEUE = "default"
#: Oban's producer default and the limit of its docs' examples (per worker process).
CONCURRENCY = 10
#: Jobs not finished: every state but completed, discarded and cancelled.
UNFINISHED_STATES = ("available", "scheduled", "suspended", "executing", "retryable")


@worker(queue=QUEUE)
class Noop:
    async def process(self, job):
        return None


@worker(queue=QUEUE)
class Pickup:
    async def process(self, job):
        processes.record_pickup(job.args["key"])


class System(harness.System):
    name = NAME
    label = "Oban for Python"
    notes = [
        f"Oban for Python: one `oban start --queues {QUEUE}:{CONCURRENCY}` process per worker "
        f"process (its default pool, notifier and stager; {CONCURRENCY} concurrent jobs per "
        "process, the limit of Oban's docs; `--log-level WARNING` silences its per-job log "
        "lines). Enqueue is asyncio only: one event loop in the enqueuing process, a "
        "client-mode `Oban`, `oban.enqueue(job, conn=...)` in a transaction on Oban's own pool "
        "(not Django's: it cannot join a Django transaction); autocommit passes an autocommit "
        "psycopg connection. Bulk is `enqueue_many()`, which in oban 0.7 without Oban Pro sends "
        "one INSERT per job (in one transaction); claim is Oban's producer query for one job.",
    ]
    has_autocommit_enqueue = True

    def __init__(self, dsn, logdir):
        super().__init__(dsn, logdir)
        import psycopg

        self._loop = asyncio.Runner()
        self._client = None  # (pool, Oban), made on first use (not by a --setup-only run)
        self._autocommit = None  # an autocommit connection, opened on first use
        self._admin = psycopg.connect(dsn, autocommit=True)  # counts, TRUNCATE, claim setup
        self._producer = None

    def _run(self, coroutine):
        return self._loop.run(coroutine)

    @property
    def oban(self):
        return self._connect()[1]

    def _connect(self):
        if self._client is None:
            pool = self._run(Oban.create_pool(self.dsn))
            self._client = (pool, Oban(pool=pool))  # client mode: no queues, nothing to start
        return self._client

    def version(self):
        from importlib.metadata import version

        return version("oban")

    def setup(self):
        from oban.schema import install

        async def install_schema():  # as Oban's installation guide does it from Python
            pool = await Oban.create_pool(self.dsn)
            try:
                await install(pool)
            finally:
                await pool.close()

        self._run(install_schema())

    def reset(self):
        from oban.testing import reset_oban

        self._run(reset_oban(self.oban))  # TRUNCATE oban_jobs, oban_leaders, oban_producers

    def unfinished_sql(self):
        states = ", ".join(f"'{state}'" for state in UNFINISHED_STATES)
        return f"SELECT count(*) FROM oban_jobs WHERE state IN ({states})"  # noqa: S608

    def _enqueue_in_transaction(self, job):
        pool, oban = self._connect()

        async def enqueue():
            async with pool.connection() as conn, conn.transaction():
                await oban.enqueue(job, conn=conn)

        self._run(enqueue())

    def enqueue_one(self, i):
        self._enqueue_in_transaction(Noop.new({"i": i}))

    def enqueue_one_autocommit(self, i):
        from psycopg import AsyncConnection

        if self._autocommit is None:
            self._autocommit = self._run(AsyncConnection.connect(self.dsn, autocommit=True))
        self._run(self.oban.enqueue(Noop.new({"i": i}), conn=self._autocommit))

    def bulk_enqueue(self, n):
        batch = 10_000
        for start in range(0, n, batch):
            jobs = [Noop.new({"i": i}) for i in range(start, min(n, start + batch))]
            self._run(self.oban.enqueue_many(jobs))

    def enqueue_pickup(self, key):
        self._enqueue_in_transaction(Pickup.new({"key": key}))

    def worker_specs(self, count):
        oban = str(Path(sys.executable).parent / "oban")  # the command Oban installs
        argv = [oban, "start", "--dsn", self.dsn, "--queues", f"{QUEUE}:{CONCURRENCY}",
                "--log-level", "WARNING", "--cron-modules", __name__]
        env = {"PYTHONPATH": str(processes.ROOT)}
        return [(argv, env) for _ in range(count)]

    # claim time: Oban's own claim (the producer's fetch_jobs query), one job at a time ---------
    def claim_setup(self, ready):
        self._admin.execute("DELETE FROM oban_jobs WHERE state = 'executing'")
        available = self._admin.execute(
            "SELECT count(*) FROM oban_jobs WHERE state = 'available'").fetchone()[0]
        self.bulk_enqueue(max(0, ready - available))
        if self._producer is None:  # who claims: a node name and producer uuid, as Oban's own
            from uuid import uuid4

            self._producer = {"node": f"{socket.gethostname()}.{os.getpid()}",
                              "uuid": str(uuid4())}
        return True

    def add_finished(self, n):
        # Rows shaped like the ones Oban leaves behind: a Noop job run once and completed.
        self._admin.execute(
            "INSERT INTO oban_jobs (state, queue, worker, attempt, args, attempted_by, "
            "inserted_at, scheduled_at, attempted_at, completed_at) "
            "SELECT 'completed', %s, %s, 1, jsonb_build_object('i', i), ARRAY['bench'], "
            "timezone('UTC', now()), timezone('UTC', now()), timezone('UTC', now()), "
            "timezone('UTC', now()) FROM generate_series(1, %s) AS i",
            [QUEUE, Noop.new().worker, n],
        )

    def claim_one(self):
        (job,) = self._run(self.oban._query.fetch_jobs(demand=1, queue=QUEUE, **self._producer))
        return job

    def close(self):
        async def shut():
            if self._autocommit is not None:
                await self._autocommit.close()
            if self._client is not None:
                await self._client[0].close()

        self._run(shut())
        self._loop.close()
        self._admin.close()
