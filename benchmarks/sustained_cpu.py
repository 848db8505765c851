"""Where a job's CPU goes under a sustained load, and in a drain of a pre-filled queue.

    benchmarks/.venvs/sqlqueue/bin/python benchmarks/sustained_cpu.py [--rate 12000]
        [--warm 20] [--window 45] [--drain 0]

Starts a throwaway PostgreSQL with pg_stat_statements (``sustained_load.Cluster``), two
``runworker`` processes (``--processes 2``, succeeded jobs kept: ``--no-prune``'s settings), and
enqueues ``--rate`` jobs a second as ``sustained_load.py`` does (a batch every 100 ms). After
``--warm`` seconds it measures ``--window`` seconds: the CPU time of each group of processes
(the workers; the server's backends, the enqueuer's among them; autovacuum; the rest of the
server, with the backends that exited), read from ``/proc``, per job enqueued, and the server's
statements from pg_stat_statements (calls, rows, time, buffers and WAL per job). With
``--drain N`` it drains N pre-filled jobs instead, measured from the workers' start to the
last job: the same figures for a drain. Times are CPU, not wall: on a shared machine the
figures per job move less than the rates do.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks import sustained_load as load  # noqa: E402
from benchmarks.pg import django_on_fresh_database  # noqa: E402
from benchmarks.workers import start_workers, stop_workers  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
STATEMENTS = (
    "SELECT calls, rows, total_exec_time, shared_blks_hit + shared_blks_read, wal_bytes, "
    "left(regexp_replace(query, '\\s+', ' ', 'g'), 90) FROM pg_stat_statements "
    "WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 8")


def _stat(pid: int) -> list:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """utime + stime of ``pid`` (and of its children it waited for, with ``children``)."""
    try:
        fields = _stat(pid)
    except FileNotFoundError:
        return 0.0
    used = int(fields[11]) + int(fields[12])
    if children:
        used += int(fields[13]) + int(fields[14])
    return used / TICKS


def children_of(parent: int) -> list:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(_stat(int(entry))[1]) == parent:
                    found.append(int(entry))
            except (FileNotFoundError, IndexError, ValueError):
                continue
    return found


def snapshot(postmaster: int, workers: int, enqueuer: int) -> dict:
    """CPU seconds so far of each group of processes."""
    groups = {"workers": cpu_seconds(workers, children=True),
              "server: backends": 0.0, "server: enqueuer's backend": 0.0,
              "server: autovacuum": 0.0,
              "server: the rest, and exited backends": cpu_seconds(postmaster, children=True)}
    for worker in children_of(workers):
        groups["workers"] += cpu_seconds(worker, children=True)
    for child in children_of(postmaster):
        try:
            command = Path(f"/proc/{child}/cmdline").read_text()
        except FileNotFoundError:
            continue
        if child == enqueuer:
            group = "server: enqueuer's backend"
        elif "autovacuum" in command:
            group = "server: autovacuum"
        elif "127.0.0.1" in command:
            group = "server: backends"
        else:
            group = "server: the rest, and exited backends"
        groups[group] += cpu_seconds(child)
    return groups


def report(before: dict, after: dict, seconds: float, jobs: int, cluster, db) -> None:
    print(f"{jobs:,} jobs in {seconds:.1f} s ({jobs / seconds:,.0f} jobs/s); CPU per job:")
    for group in before:
        used = after[group] - before[group]
        print(f"  {group:40s} {used / jobs * 1e6:7.1f} us   ({used / seconds:.0%} of a core)")
    total = sum(after.values()) - sum(before.values())
    print(f"  {'all of them':40s} {total / jobs * 1e6:7.1f} us")
    print("statements (per job: calls, ms of the server, buffers, WAL bytes):")
    for line in cluster.psql(db, STATEMENTS).splitlines():
        calls, rows, total_ms, blocks, wal, text = line.split("|", 5)
        print(f"  {int(calls) / jobs:7.4f} {float(total_ms) / jobs:7.4f} "
              f"{int(blocks) / jobs:6.1f} {float(wal) / jobs:6.0f}  "
              f"(mean {float(total_ms) / max(int(calls), 1):.2f} ms, "
              f"{int(rows) / max(int(calls), 1):.0f} rows)  {text}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=12_000, help="jobs enqueued a second")
    parser.add_argument("--warm", type=float, default=20, help="seconds before the window")
    parser.add_argument("--window", type=float, default=45, help="seconds measured")
    parser.add_argument("--drain", type=int, default=0, help="drain this many pre-filled jobs")
    args = parser.parse_args()
    logdir = Path(tempfile.mkdtemp(prefix="sqlqueue-cpu-"))
    cluster = load.Cluster()
    try:
        cluster.start()
        cluster.wait_ready()
        cluster.psql("template1", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        db = "cpu"
        env = django_on_fresh_database(cluster, db, "benchmarks.prune_settings")
        postmaster = int((cluster.datadir / "postmaster.pid").read_text().split()[0])
        if args.drain:
            cluster.psql(db, f"INSERT INTO {load.TABLE} (task_name, payload) "  # noqa: S608
                             f"SELECT '{load.TASK}', {load.PAYLOAD} "
                             f"FROM generate_series(1, {args.drain}) AS i")
            cluster.psql(db, f"VACUUM ANALYZE {load.TABLE}")
        cluster.psql(db, "SELECT pg_stat_statements_reset()")
        proc, log = start_workers(env, load.NO_PRUNE_SETTINGS, logdir, "cpu")
        enqueuer = None
        try:
            if args.drain:
                before, started = snapshot(postmaster, proc.pid, -1), time.monotonic()
                with load.connect(cluster.dsn(db)) as connection:
                    while connection.execute(load.UNFINISHED_LEFT).fetchone()[0]:
                        time.sleep(0.2)
                after, seconds = snapshot(postmaster, proc.pid, -1), time.monotonic() - started
                jobs = args.drain
            else:
                time.sleep(2)  # the workers are up and listening
                enqueuer = load.Enqueuer(cluster.dsn(db), args.rate, time.monotonic())
                backend = enqueuer.connection.info.backend_pid
                enqueuer.start()
                time.sleep(args.warm)
                cluster.psql(db, "SELECT pg_stat_statements_reset()")
                enqueued = sum(last - first + 1 for _, first, last in enqueuer.batches)
                before, started = snapshot(postmaster, proc.pid, backend), time.monotonic()
                time.sleep(args.window)
                after, seconds = snapshot(postmaster, proc.pid, backend), time.monotonic() - started
                jobs = sum(last - first + 1 for _, first, last in enqueuer.batches) - enqueued
            report(before, after, seconds, jobs, cluster, db)
            if enqueuer is not None:
                ready = cluster.psql(db, f"SELECT count(*) FROM {load.TABLE} "  # noqa: S608
                                         "WHERE status IN ('queued', 'failed')")
                print(f"ready at the end: {int(ready):,} (one second's load: {args.rate:,.0f})")
        finally:
            if enqueuer is not None:
                enqueuer.stop()
            stop_workers(proc, log)
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
