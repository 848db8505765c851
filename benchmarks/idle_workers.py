"""What idle workers cost the database: connections, transactions per second per idle worker,
and pickup latency with many of them listening.

    python -m benchmarks.idle_workers [--workers 200] [--seconds 30]

(in any virtualenv with this checkout's dependencies and psycopg). One throwaway PostgreSQL
(benchmarks/pg.py's durability, ``max_connections`` raised to fit), ``--workers`` worker processes
(``runworker --concurrency 1``, every setting at its default: polling every second, LISTEN/NOTIFY
on), started in supervisors of 10 (``--processes 10``). Once every worker has registered and they
have been idle for 10 s: the server's connections to the database (``pg_stat_activity``) and its
committed and rolled-back transactions over ``--seconds`` (``pg_stat_database``), per worker;
then 100 jobs at Poisson arrivals, 5 a second, and the latency from each enqueue's commit to the
job's first line, with every worker woken by each NOTIFY.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.pg import BenchCluster

ROOT = Path(__file__).resolve().parents[1]
PER_SUPERVISOR = 10


class ManyConnectionsCluster(BenchCluster):
    def __init__(self, max_connections):
        super().__init__()
        self.max_connections = max_connections

    def start(self):
        from benchmarks import pg

        saved = pg.SERVER_OPTIONS
        pg.SERVER_OPTIONS = [o for o in saved if "max_connections" not in o] + [
            f"-c max_connections={self.max_connections}"]
        try:
            return super().start()
        finally:
            pg.SERVER_OPTIONS = saved


def sample(conn, dbname):
    connections = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        [dbname]).fetchone()[0]
    transactions = conn.execute(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
        [dbname]).fetchone()[0]
    return connections, transactions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    supervisors = -(-args.workers // PER_SUPERVISOR)
    cluster = ManyConnectionsCluster(max_connections=args.workers * 6 + 50).start()
    logdir = Path(tempfile.mkdtemp(prefix="idle-workers-"))
    procs = []
    try:
        dbname = "idle_workers"
        dsn = cluster.create_database(dbname)
        env = {**os.environ, "BENCH_SYSTEM": "sqlqueue", "BENCH_DSN": dsn,
               "DJANGO_SETTINGS_MODULE": "benchmarks.django_settings", "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-m", "django", "migrate", "--run-syncdb"], cwd=ROOT,
                       env=env, check=True, stdout=subprocess.DEVNULL)
        pickup_file = logdir / "pickup.txt"
        pickup_file.touch()
        started = time.monotonic()
        for n in range(supervisors):
            count = min(PER_SUPERVISOR, args.workers - n * PER_SUPERVISOR)
            with open(logdir / f"supervisor-{n}.log", "w") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "django", "runworker", "--concurrency", "1",
                     "--processes", str(count), "--name", f"idle-{n}"],
                    cwd=ROOT, env={**env, "BENCH_PICKUP_FILE": str(pickup_file)},
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                ))
        import psycopg

        conn = psycopg.connect(dsn, autocommit=True)
        while True:
            registered = conn.execute("SELECT count(*) FROM django_sqlqueue_worker").fetchone()[0]
            if registered >= args.workers:
                break
            if time.monotonic() - started > 900:
                sys.exit(f"only {registered} of {args.workers} workers registered in 15 min; "
                         f"see {logdir}")
            time.sleep(1)
        print(f"{args.workers} workers up after {time.monotonic() - started:.0f} s", flush=True)
        time.sleep(10)
        connections, before = sample(conn, dbname)
        time.sleep(args.seconds)
        _, after = sample(conn, dbname)
        rate = (after - before) / args.seconds
        print(f"connections: {connections} ({connections / args.workers:.1f} per worker)")
        print(f"transactions/s: {rate:.1f} ({rate / args.workers:.2f} per idle worker)",
              flush=True)

        # Pickup latency: the benchmark's pickup task, enqueued here.
        os.environ.update({k: v for k, v in env.items() if k.startswith(("BENCH_", "DJANGO_"))})
        import django

        django.setup()
        import random

        from django.db import transaction

        from benchmarks.benchapp.tasks import pickup
        from benchmarks.processes import percentile

        committed = {}
        next_at = time.perf_counter()
        for key in range(100):
            next_at += random.expovariate(5)
            time.sleep(max(0.0, next_at - time.perf_counter()))
            with transaction.atomic():
                pickup.enqueue(key)
            committed[key] = time.time()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lines = pickup_file.read_text().splitlines()
            if len({line.split()[0] for line in lines}) >= len(committed):
                break
            time.sleep(0.2)
        started_at = {}
        for line in pickup_file.read_text().splitlines():
            key, at = line.split()
            started_at.setdefault(int(key), float(at))
        latencies = [(started_at[k] - committed[k]) * 1000 for k in committed if k in started_at]
        result = {
            "workers": args.workers, "connections": connections,
            "transactions_per_s": rate, "transactions_per_s_per_worker": rate / args.workers,
            "pickup_p50_ms": percentile(latencies, 50), "pickup_p95_ms": percentile(latencies, 95),
            "pickup_p99_ms": percentile(latencies, 99), "picked": len(latencies),
        }
        print(f"pickup with {args.workers} idle workers: p50 {result['pickup_p50_ms']:.1f} ms, "
              f"p95 {result['pickup_p95_ms']:.1f} ms, p99 {result['pickup_p99_ms']:.1f} ms "
              f"({len(latencies)} of {len(committed)} jobs)")
        print(json.dumps(result))
    finally:
        import signal

        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        cluster.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
