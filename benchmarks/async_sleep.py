"""Issue 29's benchmark: 2,000 jobs that each wait 100 ms, on ONE worker process per system.

    benchmarks/.venvs/sqlqueue/bin/python -m benchmarks.async_sleep [--jobs 2000] \
        [--concurrency 100] [--variants sqlqueue,pgqueuer,celery_gevent,...]

Starts one throwaway PostgreSQL (fsync on, as run.py does) and, for Celery, one throwaway Redis;
gives each system a fresh database and runs ``benchmarks.async_sleep_systems`` in the system's own
virtualenv (``benchmarks/.venvs``, made by run.sh; gevent must be installed in Celery's for the
gevent variant). Prints a markdown table: jobs/s and the jobs' wait (start - the enqueue's
return), p50 / p95 / max. Results JSON in ``benchmarks/results/<timestamp>/async_sleep.json``.
"""

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pg import BenchCluster  # noqa: E402
from benchmarks.redis_server import RedisServer  # noqa: E402
from benchmarks.run import loadavg, machine, venv_python  # noqa: E402

VARIANTS = ["sqlqueue", "procrastinate", "pgqueuer", "celery_prefork", "celery_gevent"]
LABELS = {
    "sqlqueue": "django-sqlqueue: `runworker --async-concurrency {c}`",
    "procrastinate": "procrastinate: `procrastinate worker --concurrency {c}`",
    "pgqueuer": "pgqueuer: `pgqueuer.run(max_concurrent_tasks={c})`",
    "celery_prefork": "Celery + Redis: prefork, default concurrency (2 children), `time.sleep`",
    "celery_gevent": "Celery + Redis: `--pool gevent --concurrency {c}`, `time.sleep`",
}
SYSTEM_OF = {"celery_prefork": "celery", "celery_gevent": "celery"}


def run_variant(cluster, redis, name, args, outdir: Path) -> dict:
    system = SYSTEM_OF.get(name, name)
    python = venv_python(system)
    if not python.exists():
        return {"variant": name, "error": f"no virtualenv {python.parent.parent}"}
    dsn = cluster.create_database(name)
    config = {"dsn": dsn, "n": args.jobs, "cap_s": args.cap, "concurrency": args.concurrency,
              "logdir": str(outdir / name)}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if system == "celery":
        env["BENCH_REDIS_URL"] = redis.url.rsplit("/", 1)[0] + f"/{VARIANTS.index(name)}"
    load = loadavg()
    with open(outdir / f"{name}.log", "w") as log:
        proc = subprocess.run([str(python), "-m", "benchmarks.async_sleep_systems", name,
                               json.dumps(config)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=log, text=True, timeout=args.cap + 300)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines:
        return {"variant": name, "error": f"exited {proc.returncode}; see {outdir}/{name}.log"}
    return {**json.loads(lines[-1]), "load_before": round(load, 2),
            "load_after": round(loadavg(), 2)}


def table(results, concurrency) -> str:
    rows = ["| system, one worker process | jobs/s | wait p50 (ms) | wait p95 (ms) | wait max (ms) "
            "| done |", "|---|---|---|---|---|---|"]
    for r in results:
        label = LABELS[r["variant"]].format(c=concurrency)
        if "error" in r:
            rows.append(f"| {label} | n/a: {r['error']} | | | | |")
            continue
        rows.append(f"| {label} | {r['jobs_per_s']:,.0f} | {r['wait_p50_ms']:,.0f} | "
                    f"{r['wait_p95_ms']:,.0f} | {r['wait_max_ms']:,.0f} | {r['done']:,}"
                    f"{'' if r['completed'] else ' (cap)'} |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=100,
                        help="async jobs at once in the one worker process (not for prefork)")
    parser.add_argument("--cap", type=float, default=180, help="seconds per system at most")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    outdir = HERE / "results" / stamp
    outdir.mkdir(parents=True, exist_ok=True)
    names = args.variants.split(",")
    cluster = BenchCluster()
    redis = RedisServer() if any(SYSTEM_OF.get(n) == "celery" for n in names) else None
    report = {"machine": machine(), "jobs": args.jobs, "sleep_seconds": 0.1,
              "concurrency": args.concurrency, "results": []}
    try:
        cluster.start()
        cluster.wait_ready()
        report["postgres"] = cluster.settings()
        if redis:
            redis.start()
        for name in names:
            print(f"==> {name}", flush=True)
            result = run_variant(cluster, redis, name, args, outdir)
            print(f"    {json.dumps(result)}", flush=True)
            report["results"].append(result)
    finally:
        cluster.destroy()
        if redis:
            redis.stop()
    (outdir / "async_sleep.json").write_text(json.dumps(report, indent=1))
    print()
    print(table(report["results"], args.concurrency))
    print(f"\nResults: {outdir / 'async_sleep.json'}")


if __name__ == "__main__":
    main()
