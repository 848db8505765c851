"""Growth: what a bigger job table does to the drain, the claim and the pickup (issue 41).

    benchmarks/.venvs/sqlqueue/bin/python benchmarks/growth.py [--backlogs 20000,200000,1000000]
        [--finished 0,1000000,10000000] [--plot PATH] [--output PATH] [--quick]
        [--server-option NAME=VALUE ...]

(the virtualenv of run.sh, which has matplotlib for ``--plot``). Starts a throwaway PostgreSQL
with the benchmark's durability (fsync on, ``pg.py``), migrates a fresh database, then:

1. **backlog**: for each size, that many ready no-op jobs (``INSERT ... SELECT generate_series``,
   then ``VACUUM ANALYZE``), drained by two ``runworker`` processes (``--processes 2``); the rate
   from the first claim to the last, and each size's ratio to the first (smallest) size's rate.
   Issue 41's goal: a 1M backlog at 0.9x or more of 20,000's.
2. **finished rows kept**: for each count, the table emptied, then that many succeeded jobs
   (finished over the last day, as ``KEEP_SUCCEEDED_SECONDS`` keeps them), ``VACUUM ANALYZE``,
   and then, with nothing else running:
   - **claim**: 200 reads of the claim's index read (the first ten ready rows in claim order,
     sustained_load.py's probe, without FOR UPDATE) with 1,000 ready jobs among the finished
     ones: p50 and p95;
   - **pickup**: the ready jobs deleted, two idle ``runworker`` processes, 100 jobs enqueued
     one at a time, one every 200 ms (each INSERT with its ``pg_notify``, as ``enqueue`` sends
     it), and ``claimed_at - enqueued_at`` of each, both read from the database's clock: p50
     and p95.
   Issue 41's goal: claim p95 and pickup p95 at 10M finished rows within 1.2x of 0 rows.

The table's and its indexes' size are printed beside each step, and beside each drain what the
server did for each job (``work_per_job``): WAL bytes and full-page images, checkpoints, the
share of the table's and indexes' page reads that missed shared_buffers, the share of updates
that were heap-only (HOT), autovacuum's runs, the rate in each fifth of the drain, and the
statements the server spent most time on, with their mean time (pg_stat_statements).
``--quick`` runs tiny sizes (2,000 and 20,000 ready; 0 and 20,000 finished) in about two
minutes, to check that it runs; its numbers mean nothing. The sustained part of issue 41 (enqueue
and drain at once, with the table's size over time) is sustained_load.py.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.pg import django_on_fresh_database  # noqa: E402
from benchmarks.sustained_load import (  # noqa: E402
    CLAIM_PROBE,
    PAYLOAD,
    TABLE,
    TASK,
    UNFINISHED_LEFT,
    Cluster,
    connect,
    percentile,
)
from benchmarks.workers import start_workers, stop_workers  # noqa: E402

#: The workers' defaults: nothing is pruned while a step runs (finished jobs are kept 7 days).
WORKER_SETTINGS = {}

SIZES = (f"SELECT pg_relation_size('{TABLE}'), pg_indexes_size('{TABLE}')")  # noqa: S608
#: Succeeded jobs that finished over the last day, one second apart at most.
FINISHED = (f"INSERT INTO {TABLE} (task_name, payload, status, attempts, claimed_at, "  # noqa: S608
            "finished_at, enqueued_at, run_at) "
            f"SELECT '{TASK}', {PAYLOAD}, 'succeeded', 1, t, t, t, t FROM ("
            "SELECT i, now() - make_interval(secs => 86400.0 * i / %s) AS t "
            "FROM generate_series(1, %s) AS i) AS finished")
READY = (f"INSERT INTO {TABLE} (task_name, payload) "  # noqa: S608
         f"SELECT '{TASK}', {PAYLOAD} FROM generate_series(1, %s) AS i")
ONE = (f"INSERT INTO {TABLE} (task_name, payload) VALUES ('{TASK}', "  # noqa: S608
       "'{\"args\": [], \"kwargs\": {}}') RETURNING id, pg_notify('django_sqlqueue', 'default')")
PICKUP_JOBS, PICKUP_GAP = 100, 0.2
CLAIM_PROBES = 200


#: What the server did, as cumulative counters (PostgreSQL 15's views): its WAL (bytes, and the
#: full-page images that a page's first change after a checkpoint writes), its checkpoints, and
#: the job table's pages read from outside shared_buffers, its updates (HOT: heap-only, no new
#: index entry) and autovacuum's runs on it.
SERVER_WORK = (
    "SELECT w.wal_bytes, w.wal_fpi, w.wal_records, "  # noqa: S608 - the table's name only
    "b.checkpoints_timed + b.checkpoints_req, "
    "coalesce(io.heap_blks_read, 0) + coalesce(io.idx_blks_read, 0), "
    "coalesce(io.heap_blks_hit, 0) + coalesce(io.idx_blks_hit, 0), "
    "t.n_tup_upd, t.n_tup_hot_upd, t.autovacuum_count "
    "FROM pg_stat_wal w, pg_stat_bgwriter b, pg_statio_user_tables io "
    f"JOIN pg_stat_user_tables t USING (relid) WHERE io.relname = '{TABLE}'")
WORK_FIELDS = ("wal_bytes", "wal_fpi", "wal_records", "checkpoints", "blocks_read", "blocks_hit",
               "updates", "hot_updates", "autovacuums")


def server_work(connection) -> dict:
    """The counters of ``SERVER_WORK`` now (every backend's statistics flushed first)."""
    connection.execute("SELECT pg_stat_force_next_flush()")
    time.sleep(1.5)  # the other backends flush theirs within a second of going idle
    return dict(zip(WORK_FIELDS, (float(value) for value in connection.execute(
        SERVER_WORK).fetchone()), strict=True))


#: The statements the server spent most time on since the last reset: the first words of each,
#: its calls and its mean time. Which of them a bigger table slows down: the claim, the outcome,
#: the heartbeat.
TOP_STATEMENTS = ("SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 60), calls, "
                  "round(mean_exec_time::numeric, 3) FROM pg_stat_statements "
                  "WHERE query NOT LIKE '%pg_stat%' ORDER BY total_exec_time DESC LIMIT 4")


def top_statements(connection) -> list:
    return [{"statement": text, "calls": calls, "mean_ms": float(mean)}
            for text, calls, mean in connection.execute(TOP_STATEMENTS).fetchall()]


def work_per_job(before: dict, after: dict, jobs: int) -> dict:
    """What the server did for each of ``jobs`` between two readings of ``server_work``."""
    done = {name: after[name] - before[name] for name in WORK_FIELDS}
    reads = done["blocks_read"] + done["blocks_hit"]
    return {"wal_bytes_per_job": round(done["wal_bytes"] / jobs),
            "wal_fpi_per_job": round(done["wal_fpi"] / jobs, 3),
            "checkpoints": int(done["checkpoints"]),
            "blocks_read_share": round(done["blocks_read"] / reads, 4) if reads else 0.0,
            "hot_update_share": (round(done["hot_updates"] / done["updates"], 3)
                                 if done["updates"] else 0.0),
            "autovacuums": int(done["autovacuums"])}


def table_size(connection) -> dict:
    table, indexes = connection.execute(SIZES).fetchone()
    return {"table_mb": round(table / 2**20, 1), "indexes_mb": round(indexes / 2**20, 1)}


def refill(cluster, db, connection, *, ready=0, finished=0) -> None:
    """Empty the table, then ``finished`` succeeded jobs and ``ready`` ready ones, vacuumed."""
    connection.execute(f"TRUNCATE {TABLE} CASCADE")
    if finished:
        connection.execute(FINISHED, (finished, finished))
    if ready:
        connection.execute(READY, (ready,))
    cluster.psql(db, f"VACUUM ANALYZE {TABLE}")


def drain_rate(connection, env, logdir, jobs: int) -> tuple[float, list]:
    """Jobs per second two worker processes drain from the ``jobs`` ready ones, first claim to
    last, and the rate in each fifth of the jobs, in claim order."""
    proc, log = start_workers(env, WORKER_SETTINGS, logdir, f"backlog-{jobs}")
    try:
        deadline = time.monotonic() + 120 + jobs / 500  # 500 jobs/s: far below any drain here
        while time.monotonic() < deadline:
            if not connection.execute(UNFINISHED_LEFT).fetchone()[0]:
                break
            time.sleep(0.5)
        else:
            raise SystemExit(f"the drain of {jobs:,} jobs did not end: see {logdir}")
        first, last = connection.execute(
            f"SELECT extract(epoch FROM min(claimed_at)), "  # noqa: S608
            f"extract(epoch FROM max(claimed_at)) FROM {TABLE}").fetchone()
        # The rate in each fifth of the drain: whether it falls as the drain goes on (what the
        # claims step over grows) or is lower throughout (the table's size itself).
        fifths = connection.execute(
            f"SELECT count(*) / (max(at) - min(at) + 0.001) FROM ("  # noqa: S608
            "SELECT extract(epoch FROM claimed_at) AS at, "
            "ntile(5) OVER (ORDER BY claimed_at) AS fifth "
            f"FROM {TABLE}) AS claims GROUP BY fifth ORDER BY fifth").fetchall()
    finally:
        stop_workers(proc, log)
    return (jobs / max(float(last) - float(first), 0.001),
            [round(float(rate)) for (rate,) in fifths])


def claim_reads(connection) -> dict:
    times = []
    for _ in range(CLAIM_PROBES):
        started = time.perf_counter()
        connection.execute(CLAIM_PROBE).fetchall()
        times.append((time.perf_counter() - started) * 1000)
    return {"claim_p50_ms": round(statistics.median(times), 3),
            "claim_p95_ms": round(percentile(times, 0.95), 3)}


def pickups(connection, env, logdir, finished: int) -> dict:
    proc, log = start_workers(env, WORKER_SETTINGS, logdir, f"pickup-{finished}")
    try:
        time.sleep(3)  # both processes up and listening
        ids = []
        for _ in range(PICKUP_JOBS):
            ids.append(connection.execute(ONE).fetchone()[0])
            time.sleep(PICKUP_GAP)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = connection.execute(
                f"SELECT extract(epoch FROM claimed_at - enqueued_at) * 1000 "  # noqa: S608
                f"FROM {TABLE} WHERE id = ANY(%s) AND claimed_at IS NOT NULL", (ids,)).fetchall()
            if len(rows) == len(ids):
                break
            time.sleep(0.2)
    finally:
        stop_workers(proc, log)
    values = [float(row[0]) for row in rows]
    return {"pickup_p50_ms": round(statistics.median(values), 2),
            "pickup_p95_ms": round(percentile(values, 0.95), 2), "picked_up": len(values)}


def plot(results, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    backlog = results["backlog"]
    left.plot([r["jobs"] for r in backlog], [r["jobs_per_s"] for r in backlog], marker="o")
    left.set_xscale("log")
    left.set_xlabel("ready jobs at the start")
    left.set_ylabel("drain, jobs/s (2 worker processes)")
    kept = results["finished"]
    counts = [max(r["finished"], 1) for r in kept]
    for key, label in (("claim_p95_ms", "claim read p95"), ("pickup_p95_ms", "pickup p95"),
                       ("pickup_p50_ms", "pickup p50")):
        right.plot(counts, [r[key] for r in kept], marker="o", label=label)
    right.set_xscale("symlog")
    right.set_xlabel("succeeded jobs kept in the table")
    right.set_ylabel("ms")
    right.legend()
    for axis in (left, right):
        axis.grid(True, linewidth=0.3)
    figure.suptitle("django-sqlqueue as the job table grows (PostgreSQL, fsync on)")
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backlogs", default="20000,200000,1000000")
    parser.add_argument("--finished", default="0,1000000,10000000")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that it runs")
    parser.add_argument("--server-option", action="append", default=[], metavar="NAME=VALUE",
                        help="a PostgreSQL setting for the run, e.g. shared_buffers=1GB "
                             "(repeat it for more)")
    parser.add_argument("--plot", type=Path, default=None, help="a PNG to draw")
    parser.add_argument("--output", type=Path, default=None, help="the results as JSON")
    args = parser.parse_args()
    if args.quick:
        args.backlogs, args.finished = "2000,20000", "0,20000"
    backlogs = [int(n) for n in args.backlogs.split(",")]
    finished_counts = [int(n) for n in args.finished.split(",")]
    logdir = Path(tempfile.mkdtemp(prefix="sqlqueue-growth-"))
    import benchmarks.pg as pg

    pg.SERVER_OPTIONS = [*pg.SERVER_OPTIONS, *(f"-c {option}" for option in args.server_option)]
    cluster = Cluster()
    results = {"backlog": [], "finished": []}
    try:
        cluster.start()
        cluster.wait_ready()
        cluster.psql("template1", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        env = django_on_fresh_database(cluster, "growth", "benchmarks.prune_settings")
        results["server"] = cluster.settings()
        with connect(cluster.dsn("growth")) as connection:
            for jobs in backlogs:
                refill(cluster, "growth", connection, ready=jobs)
                sizes = table_size(connection)
                before = server_work(connection)
                connection.execute("SELECT pg_stat_statements_reset()")
                rate, fifths = drain_rate(connection, env, logdir, jobs)
                work = work_per_job(before, server_work(connection), jobs)
                work["statements"] = top_statements(connection)
                base = results["backlog"][0]["jobs_per_s"] if results["backlog"] else rate
                results["backlog"].append({"jobs": jobs, "jobs_per_s": round(rate),
                                           "ratio": round(rate / base, 2),
                                           "fifths_jobs_per_s": fifths, **sizes, **work})
                print(json.dumps(results["backlog"][-1]), flush=True)
            for finished in finished_counts:
                refill(cluster, "growth", connection, ready=1000, finished=finished)
                row = {"finished": finished, **table_size(connection),
                       **claim_reads(connection)}
                connection.execute(f"DELETE FROM {TABLE} WHERE status = 'queued'")  # noqa: S608
                cluster.psql("growth", f"VACUUM ANALYZE {TABLE}")
                row.update(pickups(connection, env, logdir, finished))
                base = results["finished"][0] if results["finished"] else row
                row.update({f"{key}_ratio": round(row[key] / base[key], 2)
                            for key in ("claim_p95_ms", "pickup_p95_ms")})
                results["finished"].append(row)
                print(json.dumps(row), flush=True)
    finally:
        cluster.destroy()
    output = args.output or logdir / "growth.json"
    output.write_text(json.dumps(results, indent=1))
    if args.plot:
        plot(results, args.plot)
    print(f"results: {output}; worker logs: {logdir}")


if __name__ == "__main__":
    main()
