"""Drain rate of this checkout against another one (an earlier commit), in one run, alternating.

    git worktree add --detach /tmp/before <commit>
    benchmarks/.venvs/sqlqueue/bin/python -m benchmarks.ab_drain /tmp/before --rounds 3

With ``--enqueue``, each round also times the single enqueue (the "enqueue" scenario: jobs
enqueued one per transaction, 2,000 unless ``--enqueue-jobs``) of both checkouts, alternating;
with ``--bulk``, their bulk enqueue (the "bulk" scenario: 20,000 jobs prepared and inserted).

Each checkout runs its own benchmark driver (its benchmarks/) and the drain scenario of
benchmarks/README.md (W = 2 worker processes, 20,000 no-op jobs) against one throwaway
PostgreSQL server, each round in a fresh database, ``before`` and ``after`` alternating so that
the machine's load falls on both. Prints the rates per round and the medians. Needs the
django-sqlqueue benchmark virtualenv (``bash benchmarks/run.sh --quick --systems sqlqueue`` makes
it); each checkout's code runs from its own directory, ahead of the virtualenv's install.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.pg import BenchCluster
from benchmarks.run import SIZES, venv_python

ROOT = Path(__file__).resolve().parents[1]


def drain_once(cluster, checkout: Path, label: str, n: int, scenario: str = "drain",
               sizes: dict | None = None) -> dict:
    dsn = cluster.create_database(f"ab_{label}")
    logdir = Path(tempfile.mkdtemp(prefix=f"ab-{label}-"))
    config = {"dsn": dsn, "sizes": {**SIZES, "drain": {"default": n}, **(sizes or {})},
              "scenarios": [scenario], "logdir": str(logdir)}
    # Each checkout runs its own driver and code: the working directory comes first on
    # sys.path, before the virtualenv's editable install of this checkout.
    done = subprocess.run(
        [str(venv_python("sqlqueue")), "-m", "benchmarks.driver", "sqlqueue", json.dumps(config)],
        cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)}, capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"{label}: the driver failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])[scenario]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="the other checkout (a git worktree)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=SIZES["drain"]["default"])
    parser.add_argument("--keyed", action="store_true",
                        help="also drain this checkout with a per-key limit in force (the "
                             "drain_keyed scenario: 100 concurrency keys, 2 running per key)")
    parser.add_argument("--enqueue", action="store_true",
                        help="also time the single enqueue of both checkouts, alternating")
    parser.add_argument("--enqueue-jobs", type=int, default=2_000)
    parser.add_argument("--bulk", action="store_true",
                        help="also time the bulk enqueue of both checkouts, alternating")
    args = parser.parse_args()
    checkouts = {"before": args.before.resolve(), "after": ROOT}
    rates = {label: [] for label in checkouts}
    cluster = BenchCluster().start()
    try:
        for round_number in range(1, args.rounds + 1):
            for label, checkout in checkouts.items():
                drain = drain_once(cluster, checkout, label, args.jobs)
                rates[label].append(drain["steady_jobs_per_s"])
                print(f"round {round_number} {label:6} once started "
                      f"{drain['steady_jobs_per_s']:>8,.0f} jobs/s, incl. start-up "
                      f"{drain['jobs_per_s']:>8,.0f} jobs/s", flush=True)
            for label, checkout in checkouts.items() if args.enqueue else ():
                enqueue = drain_once(cluster, checkout, f"{label}_enqueue", args.jobs, "enqueue",
                                     {"single_enqueue": args.enqueue_jobs})
                rates.setdefault(f"{label} enqueue", []).append(enqueue["jobs_per_s"])
                print(f"round {round_number} {label:6} single enqueue "
                      f"{enqueue['jobs_per_s']:>8,.0f} jobs/s, p50 {enqueue['p50_ms']:.3f} ms",
                      flush=True)
            for label, checkout in checkouts.items() if args.bulk else ():
                bulk = drain_once(cluster, checkout, f"{label}_bulk", args.jobs, "bulk")
                rates.setdefault(f"{label} bulk", []).append(bulk["jobs_per_s"])
                print(f"round {round_number} {label:6} bulk enqueue "
                      f"{bulk['jobs_per_s']:>8,.0f} jobs/s", flush=True)
            if args.keyed:
                drain = drain_once(cluster, ROOT, "keyed", args.jobs, "drain_keyed")
                rates.setdefault("keyed", []).append(drain["steady_jobs_per_s"])
                print(f"round {round_number} keyed  once started "
                      f"{drain['steady_jobs_per_s']:>8,.0f} jobs/s, incl. start-up "
                      f"{drain['jobs_per_s']:>8,.0f} jobs/s ({drain['keys']} keys, "
                      f"{drain['key_limit']} running per key)", flush=True)
    finally:
        cluster.destroy()
    before, after = (statistics.median(rates[label]) for label in checkouts)
    print(f"median once started: before {before:,.0f} jobs/s, after {after:,.0f} jobs/s "
          f"({after / before:.2f}x)")
    if args.enqueue:
        before, after = (statistics.median(rates[f"{label} enqueue"]) for label in checkouts)
        print(f"median single enqueue: before {before:,.0f} jobs/s, after {after:,.0f} jobs/s "
              f"({after / before:.2f}x)")
    if args.bulk:
        before, after = (statistics.median(rates[f"{label} bulk"]) for label in checkouts)
        print(f"median bulk enqueue: before {before:,.0f} jobs/s, after {after:,.0f} jobs/s "
              f"({after / before:.2f}x)")
    if args.keyed:
        print(f"median once started with a per-key limit in force: "
              f"{statistics.median(rates['keyed']):,.0f} jobs/s")


if __name__ == "__main__":
    main()
