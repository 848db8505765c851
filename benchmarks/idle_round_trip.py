"""What a statement costs when it goes to a PostgreSQL backend that was idle, against the same
statement sent in a loop: why a claim after a NOTIFY takes longer than the claim's own work.

    benchmarks/.venvs/sqlqueue/bin/python benchmarks/idle_round_trip.py [--pause 0.2] [--n 60]

Starts a throwaway PostgreSQL (fsync on, ``pg.py``), migrates django-sqlqueue's tables, then
times, with no pause and then with ``--pause`` seconds of idleness before each one: ``SELECT 1``
and a one-row ``UPDATE`` that commits (psycopg, autocommit), ``task.enqueue()`` in autocommit,
and ``Job.objects.claim()`` of the one job just enqueued (with the queue controls read once, as
a worker holds them: the claim is then the worker's one statement). Prints p50 and p95 per line
(ms). The pickup scenario of run.py enqueues 5 jobs a second, so its workers' backends are idle
for about 200 ms before each claim. Results in docs/performance.md (the pickup target of issue 18).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.pg import BenchCluster, django_on_fresh_database  # noqa: E402


def timed(label, step, pause, n):
    times = []
    for i in range(n):
        time.sleep(pause)
        started = time.perf_counter()
        step(i)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    print(f"  {label:42s} p50 {statistics.median(times):6.3f}  p95 {times[int(0.95 * n) - 1]:6.3f}",
          flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pause", type=float, default=0.2)
    parser.add_argument("--n", type=int, default=60)
    args = parser.parse_args()
    cluster = BenchCluster()
    cluster.start()
    cluster.wait_ready()
    try:
        django_on_fresh_database(cluster, "idle_round_trip", "benchmarks.django_settings")
        import psycopg

        from benchmarks.benchapp import tasks
        from django_sqlqueue.claim.limited import read_controls
        from django_sqlqueue.models import Job, Queue

        controls = read_controls(Queue, "default")  # as a worker holds them: read once a second

        raw = psycopg.connect(cluster.dsn("idle_round_trip"), autocommit=True)
        raw.execute("CREATE TABLE one_row (id int PRIMARY KEY, n int)")
        raw.execute("INSERT INTO one_row VALUES (1, 0)")

        claims = []  # each claim's own time, of the enqueue-then-claim line

        def enqueue_then_claim(i):
            tasks.noop.enqueue(i)
            started = time.perf_counter()
            claimed = Job.objects.claim(None, "idle-round-trip", limit=16, controls=controls)
            claims.append((time.perf_counter() - started) * 1000)
            assert len(claimed) == 1, claimed

        for pause in (0.0, args.pause):
            print(f"pause before each statement: {pause:g} s (ms)", flush=True)
            timed("SELECT 1", lambda i: raw.execute("SELECT 1"), pause, args.n)
            timed("UPDATE one row, commit", lambda i: raw.execute(
                "UPDATE one_row SET n = n + 1 WHERE id = 1"), pause, args.n)
            timed("task.enqueue(), autocommit", tasks.noop.enqueue, pause, args.n)
            Job.objects.all().delete()
            claims.clear()
            timed("enqueue, then Job.objects.claim()", enqueue_then_claim, pause, args.n)
            claims.sort()
            print(f"  {'  of which the claim':42s} p50 {statistics.median(claims):6.3f}  "
                  f"p95 {claims[int(0.95 * args.n) - 1]:6.3f}", flush=True)
            Job.objects.all().delete()
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
