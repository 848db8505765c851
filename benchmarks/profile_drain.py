"""Profile django-sqlqueue's worker while it drains no-op jobs: where does a job's time go?

    benchmarks/.venvs/sqlqueue/bin/python benchmarks/profile_drain.py [--jobs 20000] [--queue]
        [--gil]

(run.sh makes that virtualenv, with py-spy in it.) Starts a throwaway PostgreSQL (fsync on, as in
the benchmark), fills the queue with plain SQL, and runs one ``manage.py runworker`` process (its
defaults) under ``py-spy record`` until the queue is empty. Prints the drain rate, the functions
that take most of the sampled time (inclusive, and self), and the statements that took most of
the server's time (from pg_stat_statements), per job. ``--queue`` runs ``runworker --queue
default`` instead of every queue; ``--gil`` keeps only the samples of threads holding the GIL,
which shows where the worker's Python spends CPU.
"""

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pg import SERVER_OPTIONS, BenchCluster  # noqa: E402


class ProfilingCluster(BenchCluster):
    def start(self):
        SERVER_OPTIONS.append("-c shared_preload_libraries=pg_stat_statements")
        try:
            return super().start()
        finally:
            SERVER_OPTIONS.pop()


def summarize(raw: Path, top: int) -> str:
    inclusive, own = collections.Counter(), collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        count = int(count)
        total += count
        frames = [f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].split("/")[-1]
                  for f in stack.split(";")]
        for frame in set(frames):
            inclusive[frame] += count
        own[frames[-1]] += count
    lines = [f"{total} samples", "", "inclusive (share of samples in which the function is on "
             "the stack):"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in inclusive.most_common(top)]
    lines += ["", "self (the function itself is running):"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in own.most_common(top)]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--queue", action="store_true")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--gil", action="store_true",
                        help="only samples of threads holding the GIL: where Python spends CPU, "
                             "without the threads that wait")
    args = parser.parse_args()
    cluster = ProfilingCluster()
    venv_bin = Path(sys.executable).parent
    out = Path(tempfile.mkdtemp(prefix="sqlqueue-profile-"))
    try:
        cluster.start()
        cluster.wait_ready()
        dsn = cluster.create_database("profile")
        env = {**os.environ, "BENCH_SYSTEM": "sqlqueue", "BENCH_DSN": dsn,
               "DJANGO_SETTINGS_MODULE": "benchmarks.django_settings", "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-m", "django", "migrate", "--run-syncdb"], env=env,
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        cluster.psql("profile", "CREATE EXTENSION pg_stat_statements")
        cluster.psql(
            "profile",
            "INSERT INTO django_sqlqueue_job (task_name, payload) "  # noqa: S608
            "SELECT 'benchmarks.benchapp.tasks.noop', "
            "jsonb_build_object('args', jsonb_build_array(i), 'kwargs', '{}'::jsonb) "
            f"FROM generate_series(1, {args.jobs}) AS i",
        )
        cluster.psql("profile", "VACUUM ANALYZE")
        cluster.psql("profile", "SELECT pg_stat_statements_reset()")
        worker = [sys.executable, "-m", "django", "runworker", "--verbosity", "0"]
        if args.queue:
            worker += ["--queue", "default"]
        raw = out / "profile.txt"
        started = time.monotonic()
        proc = subprocess.Popen(
            [str(venv_bin / "py-spy"), "record", "--format", "raw", "--rate", "250",
             "--nonblocking", *(["--gil"] if args.gil else []), "-o", str(raw), "--", *worker],
            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        unfinished_sql = ("SELECT count(*) FROM django_sqlqueue_job "
                          "WHERE status IN ('queued', 'running', 'failed')")
        while int(cluster.psql("profile", unfinished_sql)) > 0:
            time.sleep(0.2)
        elapsed = time.monotonic() - started
        # py-spy passes SIGINT on to the worker, which stops gracefully; py-spy then writes.
        proc.send_signal(2)
        proc.wait(60)
        print(f"drained {args.jobs:,} jobs in {elapsed:.1f}s: {args.jobs / elapsed:,.0f} jobs/s "
              f"(one runworker process, {'--queue default' if args.queue else 'every queue'}, "
              "under py-spy)\n")
        print(summarize(raw, args.top))
        print("\nSQL by total server time (pg_stat_statements, the 12 costliest):")
        rows = cluster.psql(
            "profile",
            "SELECT calls, round(total_exec_time::numeric, 1), "  # noqa: S608
            "regexp_replace(left(query, 110), '\\s+', ' ', 'g') FROM pg_stat_statements "
            "WHERE calls >= 3 ORDER BY total_exec_time DESC LIMIT 12",
        )
        for row in rows.splitlines():
            calls, ms, query = row.split("|", 2)
            print(f"  {int(calls) / args.jobs:5.3f}/job  {float(ms) / int(calls):6.3f} ms each  "
                  f"{float(ms) * 1000 / args.jobs:5.1f} us/job  {query}")
        print(f"\nraw profile: {raw}")
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
