"""Pruning a large backlog of finished jobs while workers drain: what does it cost them?

    python benchmarks/prune_while_draining.py [--finished 1000000] [--jobs 200000]

(any virtualenv with django-sqlqueue's ``postgres`` extra: the project's ``.venv``, or
``benchmarks/.venvs/sqlqueue`` made by run.sh). Starts a throwaway PostgreSQL with the benchmark's
durability (fsync on, ``pg.py``), migrates a fresh database, and runs three phases. Each starts
from a table holding ``--finished`` succeeded jobs that finished 30 days ago and ``--jobs`` ready
no-op jobs (both filled with ``INSERT ... SELECT generate_series``, then ``VACUUM ANALYZE``), and
two ``runworker`` processes (``--processes 2``, every other option at its default) drain them:

1. **baseline**: the workers do not prune (``KEEP_SUCCEEDED_SECONDS`` None).
2. **cleaner**: the workers run with the default retention, so their maintenance leader prunes
   the backlog as in production (worker/maintenance/cleaner.py: batches of 1000 rows, each its
   own short transaction, runs of at most 10 s with the other steps in between), starting at
   its first pass, one maintenance interval after it starts.
3. **one transaction**: the workers do not prune; once they are draining, this script prunes the
   backlog as maintenance did before it was split into steps (commit 991c63d): the whole pass
   one transaction, selecting 1000 ids and deleting them, again and again.

There are enough ready jobs for the drain to last well into the prune (a 20,000-job drain takes
about two seconds here, far less than pruning a million rows). A thread samples, every 100 ms, the
ready and running jobs left and the lowest id in the table (a prune deletes the lowest ids first,
so that tells when it starts and ends); another polls ``pg_stat_activity`` every 50 ms for the open
transactions of the client backends (``clock_timestamp() - xact_start``, any state but idle),
leaving out autovacuum and this script's own filling and sampling. Printed per phase: the drain
rate during the prune (jobs finished between its first and last deletion, per second; for the
baseline, the same window of seconds after the workers started as in the cleaner phase) and over
the whole drain, the prune's duration and rows per second, and the longest transaction seen (what
it was running, and the longest per kind of statement). Writes nothing into the repository.
"""

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pg import BenchCluster, django_on_fresh_database  # noqa: E402
from benchmarks.workers import start_workers, stop_workers  # noqa: E402

DB = "prune"
DRIVER = "prune-bench-driver"  # this script's own connections, left out of the transaction poll
TASK = "benchmarks.benchapp.tasks.noop"
#: The workers' settings per phase: the default retention prunes the 30-day-old backlog; None
#: keeps it (the baseline, and the phase where this script prunes).
KEEP_NOTHING_PRUNED = {"KEEP_SUCCEEDED_SECONDS": None, "KEEP_FAILED_SECONDS": None}


class LongestTransaction(threading.Thread):
    """Polls pg_stat_activity every ``interval`` seconds for the open transactions of client
    backends (not autovacuum); ``longest`` is (seconds, query), ``by_kind`` the longest per
    kind of statement (its first words)."""

    SQL = (
        "SELECT extract(epoch FROM clock_timestamp() - xact_start), left(query, 90) "
        "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend' AND application_name <> %s "
        "AND xact_start IS NOT NULL AND state <> 'idle'"
    )

    def __init__(self, dsn, interval=0.05):
        super().__init__(daemon=True)
        import psycopg

        self.connection = psycopg.connect(dsn, autocommit=True, application_name=DRIVER)
        self.interval = interval
        self.longest = (0.0, "")
        self.by_kind = {}
        self.samples = 0
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.wait(self.interval):
            rows = self.connection.execute(self.SQL, (DRIVER,)).fetchall()
            self.samples += 1
            for seconds, query in rows:
                seconds, query = float(seconds), " ".join(query.split())
                kind = " ".join(query.split()[:4])
                self.by_kind[kind] = max(self.by_kind.get(kind, 0.0), round(seconds, 3))
                if seconds > self.longest[0]:
                    self.longest = (seconds, query)

    def stop(self):
        self.stopping.set()
        self.join()
        self.connection.close()


class Sampler(threading.Thread):
    """Every ``interval`` seconds: (seconds since start, unfinished no-op jobs, lowest id)."""

    def __init__(self, dsn, interval=0.1):
        super().__init__(daemon=True)
        import psycopg

        self.connection = psycopg.connect(dsn, autocommit=True, application_name=DRIVER)
        self.interval = interval
        self.samples = []
        self.started = time.monotonic()
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            left = scalar(self.connection, "SELECT count(*) FROM django_sqlqueue_job "
                                           "WHERE status IN ('queued', 'failed', 'running')")
            lowest = scalar(self.connection, "SELECT min(id) FROM django_sqlqueue_job")
            self.samples.append((time.monotonic() - self.started, left, lowest))
            self.stopping.wait(self.interval)

    def stop(self):
        self.stopping.set()
        self.join()
        self.connection.close()


def scalar(connection, sql, params=()):
    return connection.execute(sql, params).fetchone()[0]


def fill(cluster, finished: int, ready: int) -> tuple:
    """``finished`` succeeded jobs that finished 30 days ago, then ``ready`` no-op jobs; returns
    the lowest and the highest id of the finished ones."""
    payload = "jsonb_build_object('args', jsonb_build_array(i), 'kwargs', '{}'::jsonb)"
    cluster.psql(
        DB,
        "INSERT INTO django_sqlqueue_job (task_name, payload, status, attempts, claimed_by, "  # noqa: S608
        f"claimed_at, finished_at, enqueued_at, run_at) SELECT '{TASK}', {payload}, "
        "'succeeded', 1, 'bench', now() - interval '30 days', now() - interval '30 days', "
        "now() - interval '30 days', now() - interval '30 days' "
        f"FROM generate_series(1, {int(finished)}) AS i",
    )
    bottom, top = (int(n) for n in cluster.psql(
        DB, "SELECT min(id), max(id) FROM django_sqlqueue_job").split("|"))
    cluster.psql(DB, f"INSERT INTO django_sqlqueue_job (task_name, payload) "  # noqa: S608
                     f"SELECT '{TASK}', {payload} FROM generate_series(1, {int(ready)}) AS i")
    cluster.psql(DB, "VACUUM ANALYZE django_sqlqueue_job")
    return bottom, top


def old_style_prune(keep_seconds: float) -> int:
    """Maintenance's prune before it was split into steps (commit 991c63d): the whole pass in one
    transaction, 1000 ids selected then deleted, until none are left."""
    import datetime as dt

    from django.db import transaction
    from django.utils import timezone

    from django_sqlqueue.models import Job

    cutoff = timezone.now() - dt.timedelta(seconds=keep_seconds)
    deleted = 0
    with transaction.atomic():
        jobs = Job.objects.filter(status="succeeded", finished_at__lt=cutoff)
        while True:
            ids = list(jobs.values_list("pk", flat=True)[:1000])
            if not ids:
                return deleted
            deleted += Job.objects.filter(pk__in=ids).delete()[0]


def rate(samples, start, end, jobs) -> int | None:
    """Jobs finished per second between ``start`` and ``end`` (seconds), from the samples."""
    inside = [(t, left) for t, left, _ in samples if start <= t <= end]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return round((inside[0][1] - inside[-1][1]) / (inside[-1][0] - inside[0][0]))


def run_phase(phase, cluster, env, args, logdir, window=None) -> dict:
    bottom, top = fill(cluster, args.finished, args.jobs)
    settings = {} if phase == "cleaner" else KEEP_NOTHING_PRUNED
    dsn = cluster.dsn(DB)
    poller, sampler = LongestTransaction(dsn), Sampler(dsn)
    poller.start()
    sampler.start()
    proc, log = start_workers(env, settings, logdir, phase)
    result = {"phase": phase, "finished_rows": args.finished, "jobs": args.jobs}
    try:
        if phase == "one-transaction":
            while not sampler.samples or sampler.samples[-1][1] > 0.95 * args.jobs:
                time.sleep(0.05)  # the workers are draining
            def prune():
                times["start"] = time.monotonic() - sampler.started
                result["deleted"] = old_style_prune(7 * 86400)
                times["end"] = time.monotonic() - sampler.started

            times = {}
            pruning = threading.Thread(target=prune)
            pruning.start()
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            last = sampler.samples[-1] if sampler.samples else None
            pruned = phase == "baseline" or (last and last[2] is not None and last[2] > top)
            if last and last[1] == 0 and (pruned or args.stop_when_drained):
                break
            time.sleep(0.1)
        if phase == "one-transaction":
            pruning.join()
    finally:
        stop_workers(proc, log)
        sampler.stop()
        poller.stop()
    samples = sampler.samples
    drained = [t for t, left, _ in samples if left == 0]
    started = next(t for t, left, _ in samples if left < args.jobs)
    result["drain_seconds"] = round(drained[0] - started, 2)
    t10 = next(t for t, left, _ in samples if left <= 0.9 * args.jobs)
    t90 = next(t for t, left, _ in samples if left <= 0.1 * args.jobs)
    result["drain_jobs_per_s_10_90"] = round(0.8 * args.jobs / (t90 - t10))
    if phase == "baseline":
        result["window"] = window
        if window:
            result["drain_jobs_per_s_in_window"] = rate(
                samples, window[0], min(window[1], drained[0]), args.jobs)
    else:
        if phase == "one-transaction":  # its deletions show only when it commits
            prune_start, prune_end = times["start"], times["end"]
        else:  # the cleaner deletes the lowest ids first, a committed batch at a time
            prune_start = next(t for t, _, lowest in samples if lowest and lowest > bottom)
            prune_end = next((t for t, _, lowest in samples if lowest and lowest > top), None)
        if prune_end is None:  # --stop-when-drained: the prune was still going
            last_t, _, lowest = samples[-1]
            result["pruned_rows"] = lowest - bottom
            result["prune_rows_per_s"] = round((lowest - bottom) / (last_t - prune_start))
            prune_end = last_t
        else:
            result["prune_seconds"] = round(prune_end - prune_start, 1)
            result["prune_rows_per_s"] = round(args.finished / (prune_end - prune_start))
        result["window"] = (round(prune_start, 1), round(prune_end, 1))
        result["drain_jobs_per_s_in_window"] = rate(samples, prune_start,
                                                    min(prune_end, drained[0]), args.jobs)
        result["drain_outlasted_prune"] = drained[0] >= prune_end
    result["longest_transaction_s"] = round(poller.longest[0], 3)
    result["longest_transaction_query"] = poller.longest[1]
    result["transaction_polls"] = poller.samples
    result["longest_by_statement"] = dict(sorted(poller.by_kind.items(), key=lambda kv: -kv[1])[:4])
    with psycopg_connect(dsn) as connection:
        connection.execute("DELETE FROM django_sqlqueue_job")
        connection.execute("DELETE FROM django_sqlqueue_leader")
    cluster.psql(DB, "VACUUM ANALYZE django_sqlqueue_job")
    return result


def psycopg_connect(dsn):
    import psycopg

    return psycopg.connect(dsn, autocommit=True, application_name=DRIVER)


def print_table(results):
    print("\n| phase | drain jobs/s during the prune | drain jobs/s, 10-90% of the drain "
          "| prune s | prune rows/s | longest transaction s |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        during = r.get("drain_jobs_per_s_in_window")
        if r.get("drain_outlasted_prune") is False:
            during = f"{during} (until the drain ended)"
        print(f"| {r['phase']} | {'-' if during is None else during} "
              f"| {r['drain_jobs_per_s_10_90']:,} | {r.get('prune_seconds', '-')} "
              f"| {r.get('prune_rows_per_s', '-')} | {r['longest_transaction_s']} |")
    for r in results:
        print(f"{r['phase']}: longest transaction was running: {r['longest_transaction_query']!r}")
        print(f"    longest per statement: {r['longest_by_statement']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--phases", default="cleaner,baseline,one-transaction",
                        help="the baseline measures the cleaner's window, so runs after it")
    parser.add_argument("--stop-when-drained", action="store_true",
                        help="end the cleaner's phase when the drain ends, the prune unfinished "
                             "(its rate so far is reported): the drain beside it is what counts")
    args = parser.parse_args()
    logdir = Path(tempfile.mkdtemp(prefix="sqlqueue-prune-bench-"))
    cluster = BenchCluster()
    try:
        cluster.start()
        cluster.wait_ready()
        env = django_on_fresh_database(cluster, DB, "benchmarks.prune_settings")
        results, window = [], None
        for phase in args.phases.split(","):
            started = time.monotonic()
            results.append(run_phase(phase, cluster, env, args, logdir, window=window))
            window = results[-1].get("window") if phase == "cleaner" else window
            print(f"{phase}: {json.dumps(results[-1])} ({time.monotonic() - started:.0f}s "
                  "with the fill)", flush=True)
        print_table(results)
        print(f"\nworker logs: {logdir}")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
