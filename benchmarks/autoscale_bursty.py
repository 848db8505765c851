"""Issue 28's benchmark: one bursty workload, run by ``runworker --autoscale 1:4`` and by fixed
``--processes 1`` and ``--processes 4``: the jobs' wait (p50 / p95 / max) and the worker
process-seconds each used.

    benchmarks/.venvs/sqlqueue/bin/python -m benchmarks.autoscale_bursty [--bursts 5] [--seed 28]
        [--cooldown 15] [--runs autoscale,fixed1,fixed4]

(any virtualenv with django-sqlqueue's ``postgres`` extra). Starts a throwaway PostgreSQL (fsync
on, ``pg.py``) and migrates a fresh database; per run, empties the job table, starts the workers
(every option at its default: 8 job threads per process, ``--start-method fork``), waits for them
to run a warm-up job, and plays the same arrivals:

- ``--bursts`` bursts, each of a seeded number of jobs (400 to 800) enqueued in batches of 50
  spread evenly over 2 seconds (``bulk_enqueue`` in a transaction per batch), separated by seeded
  idle gaps of 15 to 35 seconds; the same seed gives every run the same sizes and gaps.
- Each job holds its thread for 100 ms (``time.sleep``: a slow query or a blocking call), so one
  process runs about 80 jobs a second and a burst wants about 4 processes to drain in 2 seconds.

A job's wait is its start (it writes the time) minus the return of its batch's commit. Every
0.25 s a thread counts the worker processes: the processes of the tree but the supervisor (a
plain ``runworker`` is itself the one worker process); process-seconds are that count integrated
over the run, from the workers' start to the last job's end. The scaler's changes are the
supervisor's ``autoscale a -> b`` lines. AUTOSCALE_COOLDOWN_SECONDS is ``--cooldown`` (15 s, not
the default 60 s, so that the scaler shrinks between bursts within a short run); the target wait
and the interval are at their defaults (5 s, 2 s).
"""

import argparse
import datetime as dt
import json
import os
import random
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pg import BenchCluster, django_on_fresh_database  # noqa: E402
from benchmarks.processes import Workers, percentile, tree_pids  # noqa: E402

RUNS = {  # name -> runworker's options
    "autoscale": ["--autoscale", "1:4"],
    "fixed1": [],  # one process, no supervisor
    "fixed4": ["--processes", "4"],
}
BATCH = 50
BURST_SECONDS = 2.0


def arrivals(bursts: int, seed: int) -> list:
    """[(seconds after the first burst's start, jobs)] of every burst, the same for every run."""
    rng = random.Random(seed)
    plan, at = [], 0.0
    for _ in range(bursts):
        plan.append((at, rng.randint(400, 800)))
        at += BURST_SECONDS + rng.uniform(15, 35)
    return plan


class ProcessCounter(threading.Thread):
    """Every ``interval`` seconds, the worker processes under ``root`` (all but the root when it
    is a supervisor); ``process_seconds()`` integrates them between two times."""

    def __init__(self, root: int, supervised: bool, interval=0.25):
        super().__init__(daemon=True)
        self.root, self.supervised, self.interval = root, supervised, interval
        self.samples = []  # (time.time(), worker processes)
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.wait(self.interval):
            pids = tree_pids([self.root])
            count = len(pids) - 1 if self.supervised else len(pids)
            self.samples.append((time.time(), count))

    def process_seconds(self, start, end) -> float:
        total = 0.0
        for (at, count), (following, _) in zip(self.samples, self.samples[1:], strict=False):
            if at >= start and following <= end:
                total += count * (following - at)
        return total

    def stop(self):
        self.stopping.set()
        self.join()


def read_starts(path) -> dict:
    starts = {}
    for line in Path(path).read_text().splitlines():
        key, phase, at = line.split()
        if phase == "start":
            starts.setdefault(int(key), float(at))
    return starts


def one_run(name, plan, env, logdir: Path) -> dict:
    from django.db import connection, transaction

    from benchmarks.sleepapp import tasks
    from django_sqlqueue.models import Job

    def enqueue(keys):
        with transaction.atomic():
            Job.objects.bulk_enqueue([tasks.blocking_sleep_job.prepare(k) for k in keys])
        return time.time()

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE django_sqlqueue_job, django_sqlqueue_worker")
    fd, path = tempfile.mkstemp(prefix="bursty-", suffix=".txt")
    os.close(fd)
    os.chmod(path, 0o666)
    argv = [sys.executable, "-m", "django", "runworker", *RUNS[name]]
    workers = Workers([(argv, {**env, "BENCH_SLEEP_FILE": path})], logdir, name)
    counter = ProcessCounter(workers.pids[0], supervised=bool(RUNS[name]))
    started = time.time()
    counter.start()
    committed = {}
    try:
        enqueue([-1])  # the workers are up once it ran
        deadline = time.monotonic() + 60
        while -1 not in read_starts(path):
            if time.monotonic() > deadline or not workers.alive():
                raise RuntimeError(f"{name}: no worker ran the warm-up job; see {logdir}")
            time.sleep(0.1)
        time.sleep(3.0)
        origin, key = time.monotonic(), 0
        for offset, size in plan:
            batches = [range(key + i, key + min(i + BATCH, size))
                       for i in range(0, size, BATCH)]
            key += size
            for index, batch in enumerate(batches):
                pause = origin + offset + index * BURST_SECONDS / len(batches) - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                at = enqueue(list(batch))
                committed.update(dict.fromkeys(batch, at))
        deadline = time.monotonic() + 300
        while len([k for k in read_starts(path) if k >= 0]) < key:
            if time.monotonic() > deadline or not workers.alive():
                break
            time.sleep(0.2)
        time.sleep(0.2)  # the last jobs' 100 ms
        ended = time.time()
    finally:
        counter.stop()
        workers.stop(timeout=60)
    starts = read_starts(path)
    os.unlink(path)
    waits = [(starts[k] - at) * 1000 for k, at in committed.items() if k in starts]
    log = (logdir / f"{name}-0.log").read_text()
    changes = re.findall(r"autoscale (\d+) -> (\d+)", log)
    return {
        "run": name, "options": " ".join(RUNS[name]), "jobs": len(committed),
        "started": len(waits), "wait_p50_ms": percentile(waits, 50),
        "wait_p95_ms": percentile(waits, 95), "wait_max_ms": max(waits) if waits else None,
        "seconds": ended - started, "process_seconds": counter.process_seconds(started, ended),
        "max_processes": max((c for _, c in counter.samples), default=0),
        "scale_ups": sum(int(b) > int(a) for a, b in changes),
        "scale_downs": sum(int(b) < int(a) for a, b in changes),
    }


def table(results) -> str:
    rows = ["| workers | jobs | wait p50 (ms) | wait p95 (ms) | wait max (ms) | process-seconds "
            "| most processes | scale-ups / downs |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        command = f"runworker {r['options']}".strip()
        rows.append(
            f"| `{command}` | {r['started']:,}/{r['jobs']:,} | "
            f"{r['wait_p50_ms']:,.0f} | {r['wait_p95_ms']:,.0f} | {r['wait_max_ms']:,.0f} | "
            f"{r['process_seconds']:,.0f} (over {r['seconds']:.0f} s) | {r['max_processes']} | "
            f"{r['scale_ups']} / {r['scale_downs']} |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--cooldown", type=float, default=15.0,
                        help="AUTOSCALE_COOLDOWN_SECONDS of every run")
    parser.add_argument("--runs", default=",".join(RUNS))
    args = parser.parse_args()
    plan = arrivals(args.bursts, args.seed)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    outdir = HERE / "results" / f"{stamp}-autoscale"
    outdir.mkdir(parents=True, exist_ok=True)
    os.environ["BENCH_SQLQUEUE"] = json.dumps({"AUTOSCALE_COOLDOWN_SECONDS": args.cooldown})
    print(f"bursts (start s, jobs): {[(round(at, 1), n) for at, n in plan]}", flush=True)
    cluster = BenchCluster()
    report = {"plan": plan, "cooldown_s": args.cooldown, "seed": args.seed, "results": []}
    try:
        cluster.start()
        cluster.wait_ready()
        env = django_on_fresh_database(cluster, "bursty", "benchmarks.sleep_settings")
        for name in args.runs.split(","):
            print(f"==> {name}", flush=True)
            result = one_run(name, plan, env, outdir)
            print(f"    {json.dumps(result)}", flush=True)
            report["results"].append(result)
    finally:
        cluster.destroy()
    (outdir / "autoscale_bursty.json").write_text(json.dumps(report, indent=1))
    print()
    print(table(report["results"]))
    print(f"\nResults: {outdir / 'autoscale_bursty.json'}")


if __name__ == "__main__":
    main()
