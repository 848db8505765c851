"""Waiting for a result: the time from a job's outcome to its waiter's return (issue 27).

    benchmarks/.venvs/sqlqueue/bin/python -m benchmarks.wait_latency [--n 200] [--db both]

For each database (a throwaway PostgreSQL, fsync on, ``pg.py``; a SQLite file in WAL mode),
starts one ``runworker`` (``--concurrency 4``), then ``--n`` times: enqueues a job that sleeps
``--nap`` seconds (so that its waiter is waiting before it ends) and calls
``job.wait_finished()``. The latency is the waiter's return (``time.time()``) minus the job's
``finished_at``, which the worker stamps when the job returns, before its outcome writer writes
and commits it: so it counts the outcome write and its commit, the NOTIFY's delivery (PostgreSQL)
or the poll's wait (SQLite), and the waiter's read. One machine, one clock. Prints p50, p95 and
and max (ms). Results in docs/waiting.md.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parents[1]


def measure(env, n: int, nap: float) -> list:
    """Start a worker on ``env``'s database, wait for ``n`` jobs one after the other; the
    latencies in ms."""
    from benchmarks.benchapp import tasks

    log = open(Path(tempfile.gettempdir()) / "wait-latency-worker.log", "w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "django", "runworker", "--concurrency", "4"], cwd=ROOT, env=env,
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        tasks.nap.enqueue(0).wait_finished(timeout=60)  # the worker is up
        latencies = []
        for _ in range(n):
            job = tasks.nap.enqueue(nap).wait_finished(timeout=60)
            returned = time.time()
            latencies.append((returned - job.finished_at.timestamp()) * 1000)
        return latencies
    finally:
        worker.send_signal(2)
        worker.wait(60)
        log.close()


def report(label, latencies):
    latencies = sorted(latencies)
    p95 = latencies[max(0, int(0.95 * len(latencies)) - 1)]
    print(f"  {label:10s} n={len(latencies)}  p50 {statistics.median(latencies):7.2f} ms  "
          f"p95 {p95:7.2f} ms  max {latencies[-1]:7.2f} ms", flush=True)


def run_child(db: str, n: int, nap: float) -> None:
    """In a process of its own per database: Django is set up once per process."""
    if db == "postgresql":
        from benchmarks.pg import BenchCluster, django_on_fresh_database

        cluster = BenchCluster()
        cluster.start()
        cluster.wait_ready()
        try:
            env = django_on_fresh_database(cluster, "wait_latency", "benchmarks.wait_settings")
            report("postgresql", measure(env, n, nap))
        finally:
            from django.db import connections

            from django_sqlqueue.waiting import listener

            listener.stop_all()
            connections.close_all()
            cluster.destroy()
        return
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "BENCH_SYSTEM": "sqlqueue", "PYTHONPATH": str(ROOT),
               "BENCH_DSN": "postgresql://unused/unused", "BENCH_SQLITE": f"{scratch}/wait.sqlite3",
               "DJANGO_SETTINGS_MODULE": "benchmarks.wait_settings"}
        subprocess.run([sys.executable, "-m", "django", "migrate", "--run-syncdb"], env=env,
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        os.environ.update(env)
        import django

        django.setup()
        report("sqlite", measure(env, n, nap))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--nap", type=float, default=0.05, help="each job's sleep (s)")
    parser.add_argument("--db", choices=("postgresql", "sqlite", "both"), default="both")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args.db, args.n, args.nap)
        return
    print(f"from a job's outcome (finished_at) to its waiter's return; {args.n} jobs "
          f"one after the other, each sleeping {args.nap:g} s", flush=True)
    for db in (("postgresql", "sqlite") if args.db == "both" else (args.db,)):
        subprocess.run([sys.executable, "-m", "benchmarks.wait_latency", "--child", "--db", db,
                        "--n", str(args.n), "--nap", str(args.nap)], cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
