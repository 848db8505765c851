"""What one scrape of the metrics view costs the database, at a million rows.

    python benchmarks/metrics_queries.py [--finished 1000000] [--waiting 1000000]

(any virtualenv with django-sqlqueue's ``postgres`` and ``prometheus`` extras). Starts a
throwaway PostgreSQL with the benchmark's durability (``pg.py``), migrates a fresh database, and
times ``QueueMetricsCollector.collect()`` (queue_metrics.py: the view's three queries and its
Python) in two tables, each filled with ``INSERT ... SELECT generate_series`` then
``VACUUM ANALYZE``:

1. ``--finished`` succeeded jobs over 10 tasks and 5 queues, plus 1,000 due queued jobs, 100 due
   for a retry, 200 scheduled and 50 running: a busy table with no backlog, the usual case.
2. The same plus ``--waiting`` due queued jobs: a million-job backlog.

For contrast it times a count of every job by queue and status (what ``Job.objects.stats()``
does, and what the view does not). Prints the median and the slowest of 20 runs of each, and the
plan of the waiting-jobs query. Writes nothing into the repository.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pg import BenchCluster, django_on_fresh_database  # noqa: E402

DB = "metrics"
RUNS = 20


def rows(status: str, count: int, *, run_at="now() - interval '1 minute'") -> str:
    """INSERT of ``count`` jobs over 10 tasks and 5 queues."""
    return (
        "INSERT INTO django_sqlqueue_job (task_name, queue, payload, status, attempts, "  # noqa: S608
        "run_at, finished_at) SELECT 'bench.task' || (i % 10), 'queue' || (i % 5), "
        f"jsonb_build_object('args', jsonb_build_array(i)), '{status}', 1, {run_at}, "
        f"{'now()' if status == 'succeeded' else 'NULL'} FROM generate_series(1, {int(count)}) i"
    )


def timed(run) -> tuple:
    """(median, slowest) of RUNS runs, in milliseconds."""
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), max(times)


def measure(label: str) -> None:
    from django.db import connection
    from django.db.models import Count

    from django_sqlqueue.models import Job
    from django_sqlqueue.observability.queue_metrics import QueueMetricsCollector
    from django_sqlqueue.schedules.operations import database_now

    collector = QueueMetricsCollector("default")
    list(collector.collect())  # warm: connection, caches
    view = timed(lambda: list(collector.collect()))
    full = timed(lambda: list(Job.objects.values_list("queue", "status")
                              .annotate(n=Count("pk")).order_by()))
    print(f"{label}: metrics view queries {view[0]:.1f} ms median, {view[1]:.1f} ms slowest; "
          f"a count of every job by queue and status {full[0]:.1f} ms median", flush=True)
    query = collector._waiting(database_now("default")).query
    sql, params = query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        print("  plan of the waiting jobs' query:\n    " + "\n    ".join(
            row[0] for row in cursor.fetchall()))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--waiting", type=int, default=1_000_000)
    args = parser.parse_args()
    cluster = BenchCluster()
    try:
        cluster.start()
        cluster.wait_ready()
        django_on_fresh_database(cluster, DB, "benchmarks.django_settings")
        for statement in (rows("succeeded", args.finished), rows("queued", 1000),
                          rows("failed", 100), rows("running", 50),
                          rows("queued", 200, run_at="now() + interval '1 hour'")):
            cluster.psql(DB, statement)
        cluster.psql(DB, "VACUUM ANALYZE django_sqlqueue_job")
        measure(f"{args.finished:,} finished, 1,350 unfinished")
        cluster.psql(DB, rows("queued", args.waiting))
        cluster.psql(DB, "VACUUM ANALYZE django_sqlqueue_job")
        measure(f"{args.finished:,} finished, {args.waiting:,} more due and waiting")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
