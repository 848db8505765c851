"""What the wake-up NOTIFY costs: concurrent single enqueue with wake-ups off, limited (the
default) and on every commit, and pickup latency with idle workers, limited and on every commit.

    benchmarks/.venvs/sqlqueue/bin/python -m benchmarks.notify_cost [--rounds 3] [--seconds 10]

(any virtualenv with this checkout's dependencies and psycopg will do). One throwaway PostgreSQL
server with PostgreSQL's default durability (benchmarks/pg.py: fsync and synchronous_commit on,
as in production: the NOTIFY lock is held through the commit's flush, so that is where it costs).

- Enqueue: ``--processes`` (16) processes each enqueue one job per transaction
  (``transaction.atomic()`` around ``noop.enqueue()``) for ``--seconds``, all started together,
  while one connection LISTENs (as a worker's would). Jobs per second over all of them. The modes
  alternate round by round, so the machine's load falls on each.
- Pickup: ``runworker --processes 2``, idle, and jobs enqueued one per transaction at Poisson
  arrivals (5 a second, 100 jobs: the pickup scenario of benchmarks/README.md); latency from the
  enqueue's commit to the job's first line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.pg import BenchCluster

ROOT = Path(__file__).resolve().parents[1]
MODES = {  # name -> SQLQUEUE; --rates adds "limited to N/s" modes
    "off": {"NOTIFY": False},
    "limited": {},  # the defaults: NOTIFY on, at most NOTIFY_PER_SECOND per queue per process
    "every commit": {"NOTIFY_PER_SECOND": None},
}


def django_env(dsn: str, mode: str) -> dict:
    return {**os.environ, "BENCH_SYSTEM": "sqlqueue", "BENCH_DSN": dsn,
            "BENCH_SQLQUEUE": json.dumps(MODES[mode]), "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "benchmarks.notify_settings"}


def enqueue_child(start_at: float, seconds: float) -> None:
    """One enqueueing process: prints how many jobs it enqueued between start_at and the end."""
    import django

    django.setup()
    from django.db import connection, transaction

    from benchmarks.benchapp.tasks import noop

    connection.ensure_connection()
    noop.enqueue(0)  # warm up: the statement's text and the connection
    time.sleep(max(0.0, start_at - time.time()))
    count, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        with transaction.atomic():
            noop.enqueue(count)
        count += 1
    print(count)


def listen(dsn: str, stop: threading.Event, heard: list) -> None:
    """LISTEN as a worker would; ``heard`` gets one entry per notification received."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute('LISTEN "django_sqlqueue"')
        while not stop.is_set():
            for _ in conn.notifies(timeout=0.5):
                heard.append(1)


def concurrent_enqueue(dsn: str, mode: str, processes: int, seconds: float) -> tuple:
    """(jobs per second, notifications heard)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE django_sqlqueue_job")
        conn.execute("CHECKPOINT")  # each round starts from the same state of the disk
    stop, heard = threading.Event(), []
    listener = threading.Thread(target=listen, args=(dsn, stop, heard), daemon=True)
    listener.start()
    start_at = time.time() + 3.0  # after every child has started Django and connected
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.notify_cost", "--child", str(start_at),
             str(seconds)],
            cwd=ROOT, env=django_env(dsn, mode), stdout=subprocess.PIPE, text=True,
        )
        for _ in range(processes)
    ]
    counts = []
    for child in children:
        out, _ = child.communicate(timeout=seconds + 120)
        if child.returncode != 0:
            sys.exit(f"an enqueueing process failed ({child.returncode})")
        counts.append(int(out.strip().splitlines()[-1]))
    time.sleep(1.0)  # the last notifications
    stop.set()
    listener.join()
    return sum(counts) / seconds, len(heard)


def pickup(dsn: str, mode: str, logdir: Path) -> dict:
    """The harness's pickup scenario, with the mode's settings in the workers and here."""
    os.environ.update({k: v for k, v in django_env(dsn, mode).items()
                       if k.startswith(("BENCH_", "DJANGO_"))})
    from benchmarks import harness
    from benchmarks.run import SIZES
    from benchmarks.systems import sqlqueue

    system = sqlqueue.System(dsn, logdir)  # sets Django up once; the mode is set below
    from django.conf import settings

    from django_sqlqueue import conf
    from django_sqlqueue.enqueue import notify

    settings.SQLQUEUE = MODES[mode]
    conf._validated = None  # read again: the settings were changed by hand, not by a signal
    notify._limiter = notify.NotifyLimiter()
    specs = system.worker_specs
    system.worker_specs = lambda processes, **options: [
        (argv, {**env, "BENCH_SQLQUEUE": json.dumps(MODES[mode]),
                "DJANGO_SETTINGS_MODULE": "benchmarks.notify_settings"})
        for argv, env in specs(processes, **options)
    ]
    return harness.Runner(system, SIZES).pickup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--rates", default="",
                        help="also NOTIFY_PER_SECOND at these rates, e.g. 5,10")
    parser.add_argument("--no-pickup", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for rate in filter(None, args.rates.split(",")):
        MODES[f"limited to {rate}/s"] = {"NOTIFY_PER_SECOND": float(rate)}
    if args.child:
        enqueue_child(float(args.child[0]), float(args.child[1]))
        return 0
    cluster = BenchCluster().start()
    try:
        dsn = cluster.create_database("notify_cost")
        subprocess.run([sys.executable, "-m", "django", "migrate", "--run-syncdb"],
                       cwd=ROOT, env=django_env(dsn, "off"), check=True,
                       stdout=subprocess.DEVNULL)
        rates = {mode: [] for mode in MODES}
        for round_number in range(1, args.rounds + 1):
            for mode in MODES:
                rate, heard = concurrent_enqueue(dsn, mode, args.processes, args.seconds)
                rates[mode].append(rate)
                print(f"round {round_number} enqueue, {args.processes} processes, wake-ups "
                      f"{mode}: {rate:,.0f} jobs/s, {heard:,} notifications for "
                      f"{rate * args.seconds:,.0f} commits", flush=True)
        medians = {mode: statistics.median(values) for mode, values in rates.items()}
        logdir = Path(tempfile.mkdtemp(prefix="notify-cost-"))
        latencies = {}
        for mode in () if args.no_pickup else ("limited", "every commit"):
            # Each in its own interpreter: Django is set up once per process.
            done = subprocess.run(
                [sys.executable, "-c",
                 "import json, sys; from pathlib import Path; "
                 "from benchmarks.notify_cost import pickup; "
                 "print(json.dumps(pickup(sys.argv[1], sys.argv[2], Path(sys.argv[3]))))",
                 dsn, mode, str(logdir)],
                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                sys.exit(f"pickup ({mode}) failed:\n{done.stderr[-3000:]}")
            latencies[mode] = json.loads(done.stdout.strip().splitlines()[-1])
        print()
        print(f"| {args.processes} processes, one job per transaction | jobs/s (median of "
              f"{args.rounds}) | vs off |")
        print("|---|---|---|")
        for mode, rate in medians.items():
            print(f"| wake-ups {mode} | {rate:,.0f} | {rate / medians['off']:.2f}x |")
        print()
        print("| pickup, idle workers (2 processes), 5 jobs/s | p50 (ms) | p95 (ms) | p99 (ms) |")
        print("|---|---|---|---|")
        for mode, result in latencies.items():
            print(f"| wake-ups {mode} | {result['p50_ms']:.1f} | {result['p95_ms']:.1f} | "
                  f"{result['p99_ms']:.1f} |")
        print(json.dumps({"enqueue_jobs_per_s": rates, "pickup": latencies}))
    finally:
        cluster.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
