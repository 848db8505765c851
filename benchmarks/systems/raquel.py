"""raquel (SQLAlchemy, psycopg 3). It ships no worker command: each worker process here is the
loop its README shows, ``rq.subscribe(...)`` + ``rq.run_subscriptions()``, with the default
sleep of one second between empty polls."""

import os
import sys

from .. import harness, processes

NAME = "raquel"


def _url(dsn: str) -> str:
    return dsn.replace("postgresql://", "postgresql+psycopg://", 1)


class System(harness.System):
    name = NAME
    label = "raquel"
    notes = [
        "raquel: no bulk enqueue API and no way to share the caller's transaction, so 'bulk' "
        "is enqueue() in a loop, one transaction each.",
    ]

    def __init__(self, dsn, logdir):
        super().__init__(dsn, logdir)
        from raquel import Raquel

        self.rq = Raquel(_url(dsn))

    def version(self):
        from importlib.metadata import version

        return version("raquel")

    def setup(self):
        self.rq.create_all()

    def reset(self):
        with self.rq.engine.begin() as conn:
            conn.exec_driver_sql("TRUNCATE jobs")

    def unfinished_sql(self):
        return "SELECT count(*) FROM jobs WHERE status IN ('queued', 'claimed', 'failed')"

    def enqueue_one(self, i):
        self.rq.enqueue("default", {"i": i})

    def bulk_enqueue(self, n):
        for i in range(n):
            self.rq.enqueue("default", {"i": i})

    def prefill(self, n):
        with self.rq.engine.begin() as conn:
            conn.exec_driver_sql(
                """INSERT INTO jobs (id, queue, payload, status, min_retry_delay,
                    max_retry_delay, backoff_base, enqueued_at, scheduled_at, attempts)
                SELECT gen_random_uuid(), 'default', '{"i": ' || i || '}', 'queued', 1000,
                    43200000, 1000, (extract(epoch from now()) * 1000)::bigint,
                    (extract(epoch from now()) * 1000)::bigint, 0
                FROM generate_series(1, %(n)s) AS i""",  # noqa: S608
                {"n": int(n)},
            )

    def enqueue_pickup(self, key):
        self.rq.enqueue("default", {"pickup": key})

    def worker_specs(self, count):
        argv = [sys.executable, "-m", "benchmarks.systems.raquel"]
        env = {"PYTHONPATH": str(processes.ROOT), "BENCH_DSN": self.dsn}
        return [(argv, env) for _ in range(count)]

    # claim time: raquel's own claim (rq.claim) ----------------------------------------------
    def claim_setup(self, ready):
        with self.rq.engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM jobs WHERE status = 'claimed'")
            queued = conn.exec_driver_sql(
                "SELECT count(*) FROM jobs WHERE status = 'queued'").scalar()
        for i in range(max(0, ready - queued)):
            self.rq.enqueue("default", {"i": i})
        return True

    def add_finished(self, n):
        with self.rq.engine.begin() as conn:
            conn.exec_driver_sql(
                """INSERT INTO jobs (id, queue, payload, status, max_age, max_retry_count,
                    min_retry_delay, max_retry_delay, backoff_base, enqueued_at, scheduled_at,
                    attempts, claimed_by, claimed_at, finished_at)
                SELECT gen_random_uuid(), 'default', '{"i": 0}', 'success', NULL, NULL,
                    1000, 43200000, 1000, 0, 0, 1, NULL, 0, 0
                FROM generate_series(1, %(n)s)""",  # noqa: S608
                {"n": int(n)},
            )

    def claim_one(self):
        return self.rq.claim("default")


def main():
    from raquel import Raquel

    rq = Raquel(_url(os.environ["BENCH_DSN"]))

    @rq.subscribe("default")
    def work(job):
        payload = job.payload
        if isinstance(payload, str):
            import json

            payload = json.loads(payload)
        if isinstance(payload, dict) and "pickup" in payload:
            processes.record_pickup(payload["pickup"])

    rq.run_subscriptions()


if __name__ == "__main__":
    main()
