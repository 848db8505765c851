"""Does a fair queue keep small tenants' pickup latency behind a big tenant's backlog, and what
does fairness cost in throughput? (issue 30; docs/fairness.md#pickup-behind-a-backlog)

    python benchmarks/fairness_pickup.py --database sqlite|postgresql|mariadb
        [--backlog 50000] [--per-key 100] [--keys 10] [--rate 50] [--seed 30]
        [--scenarios empty,fair,plain] [--job-ms 0] [--concurrency 8] [--rounds 1]

(the project's ``.venv`` has what the three databases need). Starts a throwaway database
(databases.py: PostgreSQL and MariaDB at their default durability, or a SQLite file in WAL
mode), and for each scenario, on emptied tables, starts two real ``runworker --processes 2``
worker processes (every option at its default: 8 job threads each, poll interval 1 s) and
enqueues, from this process, ``--keys`` keys' (B, C, ...) ``--per-key`` jobs each (no-ops, or
with ``--job-ms``, jobs that sleep that long: what a claim costs matters less then),
one ``enqueue()`` per job in autocommit, in an order and at times drawn once from ``--seed``
(exponential gaps, ``--rate`` jobs a second in all), the same in every scenario:

* ``empty``: the queue fair and otherwise empty: the pickup latency the small keys would
  have without a big tenant (the baseline).
* ``fair``: key A's ``--backlog`` ready jobs of the same kind enqueued first
  (``bulk_enqueue``), the queue fair.
* ``plain``: the same backlog, the queue not fair: the problem fairness solves.

It waits for every job to finish, then reads the rows: the **pickup latency** of each small
key's job (``claimed_at - enqueued_at``, both from the database's clock), p50/p95/max, and the
**throughput** while A's backlog lasted: the jobs claimed from the first claim to the last of
A's, over that time (``drain s``). Prints a table,
then the two ratios the issue asks for: the small keys' p95 behind the backlog over their p95
on the empty queue (target: at most 2) and the fair throughput over the plain one (target: at
least 0.9), and a third: the CPU the workers and the database server used per job claimed until
A's backlog was all claimed, plain over fair (the rate a core buys: steadier than the rate on a
machine shared with other work). ``--rounds N`` runs the scenarios in turn N times and prints
each ratio's median. Small-key jobs that arrived after A's backlog was gone are counted apart (they
measure the empty queue again): choose ``--rate`` so that the arrivals end before the drain.
Writes nothing into the repository.
"""

import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.databases import argument_parser, bench_database  # noqa: E402
from benchmarks.processes import cpu_seconds  # noqa: E402
from benchmarks.workers import start_workers, stop_workers  # noqa: E402

BIG = "A"
SETTINGS = "benchmarks.prune_settings"  # SQLQUEUE from BENCH_SQLQUEUE: the defaults here


def arrivals(keys: int, per_key: int, rate: float, seed: int) -> list:
    """[(seconds after the start, key)]: every small key's jobs in a seeded order, at seeded
    exponential gaps of mean 1/rate."""
    rng = random.Random(seed)
    names = [chr(ord(BIG) + 1 + n) if n < 25 else f"key-{n}" for n in range(keys)]
    order = [name for name in names for _ in range(per_key)]
    rng.shuffle(order)
    at, plan = 0.0, []
    for key in order:
        at += rng.expovariate(rate)
        plan.append((at, key))
    return plan


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def empty_tables():
    from django_sqlqueue.models import Job, Queue

    Job.objects.all()._raw_delete(Job.objects.db)
    Queue.objects.all()._raw_delete(Queue.objects.db)


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {timeout:.0f} s")
        time.sleep(0.5)


def watch_backlog(processes, drained: dict):
    """Note the CPU used and the jobs claimed when A's backlog has no ready job left."""
    from django.db import connection

    from django_sqlqueue.models import Job

    try:
        ready = Job.objects.filter(concurrency_key=BIG, status="queued")
        while ready.exists():
            time.sleep(0.1)
        drained["cpu"] = cpu_seconds(processes)
        drained["claimed"] = Job.objects.exclude(status="queued").count()
    finally:
        connection.close()


def run_scenario(database, name: str, plan: list, backlog: int, logdir: Path,
                 job_ms: int, concurrency: int) -> dict:
    from benchmarks.benchapp.tasks import nap
    from django_sqlqueue.models import Job
    from django_sqlqueue.queues import control
    from django_sqlqueue.statuses import JobStatus

    empty_tables()
    control.set_fair("default", name != "plain")
    if name != "empty":
        big = nap.using(concurrency_key=BIG)
        Job.objects.bulk_enqueue(big.prepare(job_ms / 1000) for _ in range(backlog))
    total = len(plan) + (backlog if name != "empty" else 0)
    workers = start_workers(database.env, {}, logdir, f"{database.name}-{name}",
                            ["--concurrency", str(concurrency)])
    processes = [workers[0].pid] + ([database.server_pid()] if database.server else [])
    cpu_before = cpu_seconds(processes)
    drained = {}  # CPU and jobs claimed when A's backlog was all claimed (the saturated part)
    watcher = threading.Thread(target=watch_backlog, args=(processes, drained), daemon=True)
    if name != "empty":
        watcher.start()
    try:
        if name != "empty":  # the workers are draining the backlog before the first arrival
            wait_for(lambda: Job.objects.exclude(status__in=("queued",)).exists(), 120,
                     "claim by the workers")
        else:
            time.sleep(3)  # the workers are up and polling (nothing to claim)
        started = time.monotonic()
        for at, key in plan:
            pause = started + at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            nap.using(concurrency_key=key).enqueue(job_ms / 1000)
        arrived_in = time.monotonic() - started
        done = Job.objects.filter(status=JobStatus.SUCCEEDED)
        wait_for(lambda: done.count() >= total, 3600, f"{total} finished jobs")
        cpu = cpu_seconds(processes) - cpu_before
        if watcher.is_alive():
            watcher.join()
    finally:
        stop_workers(*workers)
    small = list(Job.objects.exclude(concurrency_key=BIG).values_list("enqueued_at",
                                                                      "claimed_at"))
    last_big = (Job.objects.filter(concurrency_key=BIG).order_by("-claimed_at")
                .values_list("claimed_at", flat=True).first())
    during = [claimed - enqueued for enqueued, claimed in small
              if last_big is None or enqueued <= last_big]
    pickups = sorted((claimed - enqueued).total_seconds() * 1000 for enqueued, claimed in small)
    behind = sorted(delta.total_seconds() * 1000 for delta in during)
    # Throughput while the workers are saturated: the jobs claimed from the first claim to the
    # last of A's (without a backlog: to the last finish, which the arrivals pace).
    first = Job.objects.order_by("claimed_at").values_list("claimed_at", flat=True).first()
    last = last_big or Job.objects.order_by("-finished_at").values_list("finished_at",
                                                                        flat=True).first()
    seconds = (last - first).total_seconds()
    busy = Job.objects.filter(claimed_at__lte=last).count()
    return {
        "scenario": name, "jobs": total, "arrivals_seconds": arrived_in,
        "pickup_p50_ms": statistics.median(pickups), "pickup_p95_ms": percentile(pickups, .95),
        "pickup_max_ms": pickups[-1],
        "behind_backlog": len(behind) if last_big is not None else 0,
        "behind_p95_ms": percentile(behind, .95) if behind and last_big is not None else None,
        "drain_seconds": seconds, "jobs_per_second": busy / seconds,
        # The workers' and the server's CPU per job claimed, from the workers' start until
        # A's backlog was all claimed (the last job's end without a backlog): what a job costs
        # while the workers are saturated, which other work on the machine changes far less
        # than the rate.
        "cpu_ms_per_job": (drained["cpu"] - cpu_before) * 1000 / drained["claimed"]
        if drained else cpu * 1000 / total,
        # The machine's load at the end (1 minute): other work on it slows the workers.
        "load": os.getloadavg()[0],
    }


def report(rounds: list):
    """A row per scenario run, then each round's two ratios and their medians."""
    print(f"{'scenario':<8} {'jobs':>7} {'pickup p50':>11} {'p95':>9} {'max':>9} "
          f"{'arrived behind A':>17} {'drain s':>8} {'jobs/s':>8} {'CPU ms/job':>10} "
          f"{'load':>5}")
    for results in rounds:
        for r in results.values():
            behind = (f"{r['behind_backlog']:>5} p95 {r['behind_p95_ms']:>7.0f}"
                      if r["behind_p95_ms"] is not None else f"{'-':>17}")
            print(f"{r['scenario']:<8} {r['jobs']:>7,} {r['pickup_p50_ms']:>9.0f}ms "
                  f"{r['pickup_p95_ms']:>7.0f}ms {r['pickup_max_ms']:>7.0f}ms {behind} "
                  f"{r['drain_seconds']:>8.1f} {r['jobs_per_second']:>8.0f} "
                  f"{r['cpu_ms_per_job']:>10.3f} {r['load']:>5.1f}")
    pickup = [r["fair"]["pickup_p95_ms"] / r["empty"]["pickup_p95_ms"]
              for r in rounds if "empty" in r and "fair" in r]
    throughput = [r["fair"]["jobs_per_second"] / r["plain"]["jobs_per_second"]
                  for r in rounds if "fair" in r and "plain" in r]
    # The rate the same CPU buys: plain's CPU per job over fair's (above 1: fair costs less).
    capacity = [r["plain"]["cpu_ms_per_job"] / r["fair"]["cpu_ms_per_job"]
                for r in rounds if "fair" in r and "plain" in r]
    for label, ratios, target in (
            ("small keys' p95 behind the backlog / on an empty queue", pickup, "<= 2"),
            ("throughput fair / plain", throughput, ">= 0.9"),
            ("CPU per job, plain / fair", capacity, ">= 0.9")):
        if ratios:
            each = ", ".join(f"{ratio:.2f}" for ratio in ratios)
            print(f"{label}: {statistics.median(ratios):.2f} (target {target}; "
                  f"{'median of ' + each if len(ratios) > 1 else 'one round'})")


def main():
    parser = argument_parser(__doc__)
    parser.add_argument("--backlog", type=int, default=50_000)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--per-key", type=int, default=100)
    parser.add_argument("--rate", type=float, default=50.0, help="small-key jobs a second")
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--scenarios", default="empty,fair,plain")
    parser.add_argument("--job-ms", type=int, default=0, help="how long each job sleeps")
    parser.add_argument("--concurrency", type=int, default=8, help="job threads per process")
    parser.add_argument("--rounds", type=int, default=1,
                        help="the scenarios this many times over, in turn (a shared machine's "
                             "noise: read the median ratio)")
    args = parser.parse_args()
    plan = arrivals(args.keys, args.per_key, args.rate, args.seed)
    logdir = Path(tempfile.mkdtemp(prefix="fairness-pickup-"))
    with bench_database(args.database, SETTINGS) as database:
        print(f"{args.database}: {database.settings()}; worker logs in {logdir}", flush=True)
        print(f"{args.keys} small keys x {args.per_key} jobs at {args.rate:g}/s (seed "
              f"{args.seed}, {plan[-1][0]:.0f} s); key {BIG}: {args.backlog:,} ready jobs; "
              f"jobs of {args.job_ms} ms",
              flush=True)
        rounds = []
        for number in range(args.rounds):
            rounds.append({})
            results = rounds[-1]
            for name in args.scenarios.split(","):
                results[name] = run_scenario(database, name, plan, args.backlog, logdir,
                                             args.job_ms, args.concurrency)
                print(f"  round {number + 1}, {name}: {results[name]}", flush=True)
        report(rounds)


if __name__ == "__main__":
    main()
