"""The benchmark orchestrator: ``bash benchmarks/run.sh`` runs this after making the virtualenvs.

It starts a throwaway PostgreSQL (fsync on), gives every system a fresh database on it, runs each
system's driver in that system's own virtualenv, runs pgbench on the bare claim-and-complete SQL,
then does the same on a throwaway MariaDB (its default durability) for the systems that support
it, prints a markdown table with ratios per database, and writes the results JSON
(benchmarks/results/) and the chart (docs/images/benchmarks.png, PostgreSQL).
"""

import argparse
import datetime as dt
import json
import os
import platform
import re
import string
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pg import BenchCluster  # noqa: E402
from benchmarks.redis_server import RedisServer  # noqa: E402
from benchmarks.workflows import report_lines as workflow_lines  # noqa: E402

SYSTEMS = ["sqlqueue", "pgqueuer", "oban", "procrastinate", "django_tasks_db", "dj_queue",
           "django_q2", "raquel", "chancy", "celery", "celery_solo", "rq"]
LABELS = {
    "sqlqueue": "django-sqlqueue", "pgqueuer": "pgqueuer", "oban": "Oban for Python",
    "procrastinate": "procrastinate", "dj_queue": "dj-queue",
    "django_tasks_db": "django-tasks-db", "django_q2": "django-q2 (ORM)", "raquel": "raquel",
    "chancy": "Chancy", "celery": "Celery + Redis", "celery_solo": "Celery + Redis (solo)",
    "rq": "RQ (django-rq)",
}
#: The peers whose queue is in Redis, not PostgreSQL (each gets its own Redis database number).
REDIS_SYSTEMS = ["celery", "celery_solo", "rq"]
#: Systems that share another's virtualenv.
VENV_OF = {"celery_solo": "celery"}
#: The MariaDB phase (issue 19): the systems that also run on MariaDB, measured on one throwaway
#: MariaDB server after the PostgreSQL systems, with these scenarios. (The claim scenario's
#: finished rows and the PostgreSQL settings of the extra scenarios are PostgreSQL-only.)
MARIADB_SYSTEMS = ["sqlqueue", "django_tasks_db", "dj_queue", "django_q2"]
MARIADB_SCENARIOS = ["enqueue", "bulk", "drain", "pickup"]

SIZES = {
    "processes": 2,  # W: worker processes in the drain and pickup scenarios
    "single_enqueue": 300,  # jobs enqueued one per transaction (and as many baseline rows)
    "bulk_enqueue": {"default": 20_000, "django_tasks_db": 5_000, "django_q2": 5_000,
                     "raquel": 1_000},
    "drain": {"default": 20_000, "procrastinate": 10_000, "django_tasks_db": 5_000,
              "django_q2": 1_000, "raquel": 5_000, "chancy": 1_000, "dj_queue": 5_000},
    "drain_cap_s": 40,  # a drain stops here; the rate is then done / elapsed
    "pickup_rate": 5,  # jobs per second, Poisson arrivals: low enough for every system's workers
    "pickup_jobs": 100,
    "claim_ready": 1_000,
    "claim_finished": [10_000, 1_000_000],
    "claim_samples": 200,
    "claim_cap_s": 15,  # per table size; at least 20 claims are timed
    "memory": {"default": 100_000},
    "memory_backlog": 1_000,  # the memory run keeps about this many jobs ready
    "memory_cap_s": 75,
    # Concurrent enqueue: this many processes, each this many jobs, one per transaction.
    "concurrent_processes": 16,
    "concurrent_per_process": 150,
    # The long drain: sized per system so that start-up is under 10% of it (checked and shown).
    # (procrastinate, RQ and Chancy drain so slowly that the plain drain is long enough.)
    "drain_long": {"default": 30_000, "sqlqueue": 240_000, "pgqueuer": 120_000},
    "drain_long_cap_s": 90,
    # Jobs that each insert one row.
    "drain_write": {"default": 10_000, "sqlqueue": 20_000, "rq": 3_000},
    # drain_transactional (django-sqlqueue): drain_write's jobs, transactional, run by the lane
    # this many per transaction; then a quarter as many at each [batch, lanes per process].
    "transactional_batch": 64,
    "transactional_sweep": [[1, 1], [10, 1], [64, 1], [64, 4]],
    # Workflows (issue 26, benchmarks/workflows.py): a group of this many jobs with a callback,
    # a chain of this many steps; each stops with an error past the cap.
    "fanin_jobs": 10_000, "chain_steps": 1_000, "workflow_cap_s": 240,
}
QUICK_SIZES = {
    **SIZES, "single_enqueue": 50, "bulk_enqueue": {"default": 2_000, "raquel": 200},
    "drain": {"default": 2_000, "django_q2": 200, "raquel": 1_000}, "drain_cap_s": 15,
    "pickup_jobs": 20, "claim_finished": [1_000, 20_000], "claim_samples": 30,
    "memory": {"default": 5_000}, "memory_cap_s": 15,
    "concurrent_processes": 4, "concurrent_per_process": 20,
    "drain_long": {"default": 3_000, "rq": 500}, "drain_long_cap_s": 20,
    "drain_write": {"default": 1_000, "rq": 300},
    "fanin_jobs": 200, "chain_steps": 20, "workflow_cap_s": 60,
}
SCENARIOS = ["enqueue", "bulk", "drain", "pickup", "claim"]
# django-sqlqueue also drains with `runworker --queue default` (its claim then walks the ready
# index), and runs many jobs through one worker for its memory. For the peers, the drain
# scenario samples the workers' memory.
# The scenarios added with the Redis peers (issue 18), for django-sqlqueue, the two fastest
# PostgreSQL peers and the Redis peers: single enqueue in autocommit, concurrent enqueue from 16
# processes (django-sqlqueue also with NOTIFY off), the long drain, and jobs that write a row.
EXTRA = {
    "sqlqueue": ["drain_queue", "memory", "enqueue_autocommit", "enqueue16",
                 "enqueue16_nonotify", "drain_long", "drain_write", "drain_transactional",
                 "enqueue_nosync", "pickup_nosync", "bulk_prepared"],
    "pgqueuer": ["enqueue_autocommit", "enqueue16", "drain_long"],
    "procrastinate": ["enqueue_autocommit", "enqueue16", "drain_write"],
    "chancy": ["enqueue_autocommit", "enqueue16"],
    "oban": ["enqueue_autocommit", "enqueue16", "drain_long"],
    "celery": ["enqueue_autocommit", "enqueue16", "drain_long", "drain_write"],
    "rq": ["enqueue_autocommit", "enqueue16", "drain_write"],
}
# The workflow scenarios (issue 26, benchmarks/workflows.py), for the systems with workflows.
for _name in ("sqlqueue", "celery"):
    EXTRA[_name] = [*EXTRA[_name], "fanin", "chain"]
# Celery's solo pool differs from Celery's default only in its workers: no enqueue scenarios.
ONLY = {"celery_solo": ["drain", "pickup", "drain_long", "drain_write"]}

# The variants of pgbench/claim_complete.sql (see its header); minimal_claim_complete.sql is
# used as it is.
PGBENCH_SCRIPTS = {
    "claim_complete_queue.sql": {"queue_condition": "AND queue = 'default'", "begin": "",
                                 "commit": ""},
    "claim_complete_all.sql": {"queue_condition": "", "begin": "", "commit": ""},
    "claim_complete_one_txn.sql": {"queue_condition": "AND queue = 'default'",
                                   "begin": "BEGIN;", "commit": "COMMIT;"},
}
PGBENCH_RUNS = [  # (label, script, rows per transaction, clients, ready rows before the run)
    ("queue, 1 row/txn, 2 clients", "claim_complete_queue.sql", 1, 2, 100_000),
    ("queue, 10 rows/txn, 2 clients", "claim_complete_queue.sql", 10, 2, 300_000),
    ("queue, 1 row/txn, 8 clients", "claim_complete_queue.sql", 1, 8, 100_000),
    ("queue, 10 rows/txn, 8 clients", "claim_complete_queue.sql", 10, 8, 300_000),
    ("every queue, 1 row/txn, 2 clients", "claim_complete_all.sql", 1, 2, 100_000),
    ("every queue, 10 rows/txn, 2 clients", "claim_complete_all.sql", 10, 2, 300_000),
    ("floor: claim+complete in 1 txn, 1 row, 2 clients", "claim_complete_one_txn.sql", 1, 2,
     100_000),
    ("minimal table, 1 row/txn, 2 clients", "minimal_claim_complete.sql", 1, 2, 100_000),
    ("minimal table, 10 rows/txn, 2 clients", "minimal_claim_complete.sql", 10, 2, 300_000),
]


def say(text):
    print(text, flush=True)


def venv_python(name: str) -> Path:
    return HERE / ".venvs" / VENV_OF.get(name, name) / "bin" / "python"


def machine() -> dict:
    info = {"cores": os.cpu_count(), "platform": platform.platform()}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        model = re.search(r"model name\s*:\s*(.*)", cpuinfo)
        info["cpu"] = model.group(1).strip() if model else "?"
        mem = re.search(r"MemTotal:\s*(\d+)", Path("/proc/meminfo").read_text())
        info["memory_gb"] = round(int(mem.group(1)) / 2**20, 1)
    except OSError:
        pass
    return info


def checkout() -> str:
    """The commit django-sqlqueue was measured at, and whether its code had local changes."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "django_sqlqueue"],
                               cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return commit + (" + local changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "?"


def loadavg() -> float:
    return os.getloadavg()[0]


# ---- one system -----------------------------------------------------------------------------
def run_system(cluster, name, sizes, logdir: Path, timeout: float, redis=None,
               only=None) -> dict:
    failed = HERE / ".venvs" / f"{VENV_OF.get(name, name)}.failed"
    if failed.exists() or not venv_python(name).exists():
        reason = failed.read_text().strip() if failed.exists() else "no virtualenv"
        return {"system": name, "label": LABELS[name], "error": f"not installed: {reason}"}
    dsn = cluster.create_database(name)
    scenarios = only or ONLY.get(name, SCENARIOS + EXTRA.get(name, []))
    config = {"dsn": dsn, "sizes": sizes, "scenarios": scenarios, "logdir": str(logdir / name)}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if name in REDIS_SYSTEMS:
        if redis is None:
            return {"system": name, "label": LABELS[name], "error": "no Redis server"}
        # Its own Redis database number, so a system never sees another's leftovers.
        env["BENCH_REDIS_URL"] = redis.url.rsplit("/", 1)[0] + f"/{REDIS_SYSTEMS.index(name)}"
    started, load_before = time.monotonic(), loadavg()
    stdout_path = logdir / f"{name}.json"
    with open(logdir / f"{name}.log", "w") as log, open(stdout_path, "w") as stdout:
        proc = subprocess.Popen(
            [str(venv_python(name)), "-m", "benchmarks.driver", name, json.dumps(config)],
            cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env,
        )

        def pump():
            for line in proc.stderr:
                log.write(line)
                log.flush()
                if line.startswith("    ["):
                    print(line.rstrip()[:220], flush=True)

        pumper = threading.Thread(target=pump, daemon=True)
        pumper.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return {"system": name, "label": LABELS[name],
                    "error": f"timed out after {timeout:.0f}s"}
        pumper.join(10)
    output = stdout_path.read_text().strip().splitlines()
    if proc.returncode != 0 or not output:
        return {"system": name, "label": LABELS[name],
                "error": f"driver exited {proc.returncode}; see {logdir / (name + '.log')}"}
    result = json.loads(output[-1])
    result["seconds"] = round(time.monotonic() - started, 1)
    result["load_before"], result["load_after"] = round(load_before, 2), round(loadavg(), 2)
    return result


# ---- MariaDB ---------------------------------------------------------------------------------
def run_mariadb(names, sizes, outdir: Path, timeout: float, scenarios=None) -> dict:
    """The MariaDB phase: one throwaway MariaDB server (its default durability), a fresh
    database per system, the same drivers with a ``mysql://`` URL. Its results (or why there are
    none) go under ``"mariadb"`` in the results JSON."""
    from benchmarks.mariadb import BenchMariaDB

    try:
        server = BenchMariaDB()
    except RuntimeError as exc:  # no server binaries: reported, the PostgreSQL results stand
        return {"error": str(exc), "systems": []}
    logdir = outdir / "mariadb"
    logdir.mkdir(parents=True, exist_ok=True)
    phase = {"systems": []}
    say(f"==> MariaDB: starting a throwaway server in {server.base} (durability at its defaults)")
    try:
        server.start()
        phase["server"] = server.settings()
        say(f"    {phase['server']}")
        for name in names:
            say(f"==> {LABELS[name]} on MariaDB")
            missing = HERE / ".venvs" / f"{VENV_OF.get(name, name)}.mariadb.failed"
            if missing.exists():
                result = {"system": name, "label": LABELS[name], "error": "mysqlclient not "
                          f"installed: {missing.read_text().strip()[:300]}"}
            else:
                result = run_system(server, name, sizes, logdir, timeout,
                                    only=scenarios or MARIADB_SCENARIOS)
            phase["systems"].append(result)
            if "error" in result:
                say(f"    n/a: {result['error']}")
    except (RuntimeError, subprocess.CalledProcessError) as exc:  # the server failed
        phase["error"] = f"the MariaDB server failed: {exc}; log: {server.log()[-500:]}"
        say(f"    n/a: {phase['error']}")
    finally:
        server.destroy()
    return phase


# ---- pgbench --------------------------------------------------------------------------------
def run_pgbench(cluster, logdir: Path, seconds: int) -> list:
    dsn = cluster.create_database("pgbench_limit")
    subprocess.run(
        [str(venv_python("sqlqueue")), "-m", "benchmarks.driver", "sqlqueue",
         json.dumps({"dsn": dsn, "sizes": {}, "scenarios": [], "logdir": str(logdir / "pgb")}),
         "--setup-only"],
        cwd=ROOT, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    cluster.psql("pgbench_limit", (HERE / "pgbench" / "minimal_schema.sql").read_text())
    scripts = pgbench_scripts(logdir / "pgbench")
    results = []
    for label, script, batch, clients, ready in PGBENCH_RUNS:
        if script.startswith("minimal"):
            table, done_status = "minimal_job", "done"
            payload = '{"args": [], "kwargs": {}}'
            fill = f"INSERT INTO minimal_job (payload) SELECT '{payload}' FROM generate_series(1, {ready})"  # noqa: S608, E501
        else:
            table, done_status = "django_sqlqueue_job", "succeeded"
            payload = '{"args": [], "kwargs": {}}'
            fill = f"INSERT INTO django_sqlqueue_job (task_name, payload) SELECT 'noop', '{payload}' FROM generate_series(1, {ready})"  # noqa: S608, E501
        cluster.psql("pgbench_limit", f"TRUNCATE {table}")
        cluster.psql("pgbench_limit", fill)
        cluster.psql("pgbench_limit", f"VACUUM ANALYZE {table}")
        cluster.psql("pgbench_limit", "CHECKPOINT")
        wal_before = cluster.psql("pgbench_limit", "SELECT pg_current_wal_lsn()")
        proc = subprocess.run(
            [str(cluster.bindir / "pgbench"), "-h", "127.0.0.1", "-p", str(cluster.port),
             "-U", cluster.superuser, "-n", "-M", "prepared", "-D", f"batch={batch}",
             "-f", str(scripts[script]), "-c", str(clients), "-j", str(clients),
             "-T", str(seconds), "pgbench_limit"],
            capture_output=True, text=True,
        )
        with (logdir / "pgbench.log").open("a") as log:
            log.write(f"== {label}\n{proc.stdout}{proc.stderr}\n")
        count = f"SELECT count(*) FROM {table} WHERE status = '{done_status}'"  # noqa: S608
        completed = int(cluster.psql("pgbench_limit", count))
        wal_sql = f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{wal_before}')"
        wal = int(float(cluster.psql("pgbench_limit", wal_sql)))
        tps = re.search(r"tps = ([\d.]+) \(without initial", proc.stdout)
        latency = re.search(r"latency average = ([\d.]+) ms", proc.stdout)
        row = {"label": label, "script": script, "rows_per_txn": batch, "clients": clients,
               "ready_rows": ready, "seconds": seconds, "completed_jobs": completed,
               "wal_bytes_per_job": round(wal / completed) if completed else None}
        if tps and proc.returncode == 0:
            row["batches_per_s"] = float(tps.group(1))
            # Jobs actually completed (not batches x rows: the last batches may be short).
            row["jobs_per_s"] = completed / seconds
            row["latency_ms"] = float(latency.group(1)) if latency else None
        else:
            row["error"] = (proc.stderr or proc.stdout).strip()[-300:]
        rate = f"{row['jobs_per_s']:,.0f} jobs/s" if "jobs_per_s" in row else row["error"]
        say(f"    pgbench {label}: {rate}")
        results.append(row)
    return results


def pgbench_scripts(directory: Path) -> dict:
    """{script name: its path}: the variants of claim_complete.sql written to ``directory``,
    the other scripts where they are."""
    directory.mkdir(parents=True, exist_ok=True)
    template = string.Template((HERE / "pgbench" / "claim_complete.sql").read_text())
    paths = {}
    for name, fill in PGBENCH_SCRIPTS.items():
        paths[name] = directory / name
        paths[name].write_text(template.substitute(fill))
    for _label, name, *_ in PGBENCH_RUNS:
        paths.setdefault(name, HERE / "pgbench" / name)
    return paths


# ---- the report -----------------------------------------------------------------------------
def _get(result, *path):
    value = result
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


METRICS = [
    # (row label, path, format, higher is better)
    ("Enqueue, 1 job/transaction (jobs/s)", ("enqueue", "jobs_per_s"), "{:,.0f}", True),
    ("Bulk enqueue (jobs/s)", ("bulk", "jobs_per_s"), "{:,.0f}", True),
    ("Bulk enqueue of prepared jobs, django-sqlqueue's bulk_enqueue (jobs/s)",
     ("bulk_prepared", "jobs_per_s"), "{:,.0f}", True),
    ("Drain, W=2, incl. start-up (jobs/s)", ("drain", "jobs_per_s"), "{:,.0f}", True),
    ("Drain, W=2, once started (jobs/s)", ("drain", "steady_jobs_per_s"), "{:,.0f}", True),
    ("Long drain, W=2, once started (jobs/s)", ("drain_long", "steady_jobs_per_s"), "{:,.0f}",
     True),
    ("Drain start-up share (long drain, else the drain): jobs, share", None, "startup", None),
    ("Drain, WAL bytes per job", ("drain", "wal_bytes_per_job"), "{:,.0f}", False),
    ("Drain, rows written per job (HOT share of updates)", None, "rows", False),
    ("Drain of jobs writing 1 row, W=2, once started (jobs/s)",
     ("drain_write", "steady_jobs_per_s"), "{:,.0f}", True),
    ("Drain of the same jobs, transactional (the lane), W=2, once started (jobs/s)",
     ("drain_transactional", "steady_jobs_per_s"), "{:,.0f}", True),
    ("Enqueue, autocommit (jobs/s)", ("enqueue_autocommit", "jobs_per_s"), "{:,.0f}", True),
    ("Enqueue from 16 processes, 1 job/transaction (jobs/s)", ("enqueue16", "jobs_per_s"),
     "{:,.0f}", True),
    ("Pickup latency p50 (ms)", ("pickup", "p50_ms"), "{:,.1f}", False),
    ("Pickup latency p95 (ms)", ("pickup", "p95_ms"), "{:,.1f}", False),
    ("Pickup latency p99 (ms)", ("pickup", "p99_ms"), "{:,.1f}", False),
    ("Claim, {small} finished rows (ms, p50)", ("claim", "small", "p50_ms"), "{:,.2f}", False),
    ("Claim, {large} finished rows (ms, p50)", ("claim", "large", "p50_ms"), "{:,.2f}", False),
    ("Worker RSS during drain, start → end (MB)", None, None, False),
    ("Commit probe before the system ran (ms, mean)", ("commit_probe", "mean_ms"), "{:,.2f}",
     None),
]


#: The rows of the MariaDB table: its scenarios' metrics, the drain's memory and the commit probe.
MARIADB_METRICS = [metric for metric in METRICS
                   if metric[1] is None or metric[1][0] in MARIADB_SCENARIOS + ["commit_probe"]]


def _reason(error: str) -> str:
    """An error's first line, short enough for a table cell."""
    line = error.strip().splitlines()[0] if error.strip() else "?"
    return line if len(line) <= 80 else line[:77] + "..."


#: What a drain cost the database (PostgreSQL's WAL and rows): not a figure of a queue in Redis.
WORK_KEYS = ("wal_bytes_per_job", "rows_written_per_job", "hot_update_share")


def _metric(result, path):
    """``_get(result, *path)``, or None for the database's work of a system queued in Redis."""
    if path[-1] in WORK_KEYS and result.get("system") in REDIS_SYSTEMS:
        return None
    return _get(result, *path)


def cell(result, metric, reasons=False):
    """One cell; with ``reasons``, a system or scenario that failed says why ("n/a: ...")."""
    label, path, fmt, _ = metric
    if "error" in result:
        return f"n/a: {_reason(result['error'])}" if reasons else "n/a"
    if path is None and fmt == "startup":
        drain = _get(result, "drain_long")
        if not isinstance(drain, dict) or "startup_share" not in drain:
            drain = _get(result, "drain")
        if not isinstance(drain, dict) or "startup_share" not in drain:
            return "n/a"
        return f"{drain['n']:,}, {drain['startup_share']:.0%}"
    if path is None and fmt == "rows":
        rows = _metric(result, ("drain", "rows_written_per_job"))
        hot = _metric(result, ("drain", "hot_update_share"))
        if rows is None:
            return "n/a"
        return f"{rows:g} ({hot:.0%})" if hot is not None else f"{rows:g}"
    if path is None:  # memory
        start, end = _get(result, "drain", "rss_mb_start"), _get(result, "drain", "rss_mb_end")
        if start is None:
            return "n/a"
        return f"{start:.0f} → {end:.0f}"
    value = _metric(result, path)
    if value is None:
        scenario = _get(result, path[0])
        if isinstance(scenario, dict) and "error" in scenario:
            return f"n/a: {_reason(scenario['error'])}" if reasons else "error"
        return "n/a"
    text = fmt.format(value)
    if path[0].startswith("drain") and not _get(result, path[0], "completed"):
        text += "*"
    return text


def _rows(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"


def metric_label(metric, report) -> str:
    small, large = report["sizes"]["claim_finished"][:2]
    return metric[0].format(small=_rows(small), large=_rows(large))


def ratio_text(ours, theirs, higher_better):
    if ours is None or theirs is None or ours == 0 or theirs == 0:
        return "n/a"
    ratio = ours / theirs if higher_better else theirs / ours
    return f"{ratio:.2f}x"


def batched_limit(report):
    """The best pgbench rate at 10 rows per transaction (our table or the minimal one)."""
    return max((r.get("jobs_per_s", 0) for r in report.get("pgbench", [])
                if r["rows_per_txn"] == 10 and "every" not in r["label"]), default=None)


def targets(report, ours, peers) -> list:
    """The targets of issue 7, each with the numbers of this run."""
    peers = [p for p in peers if "error" not in p]
    lines = ["Targets (ratios from this run):", ""]

    def best(path, higher=True):
        found = [(_get(p, *path), p["label"]) for p in peers if _get(p, *path) is not None]
        if not found:
            return None, "?"
        return (max if higher else min)(found)

    def verdict(ok):
        return "met" if ok else "MISSED"

    drain = _get(ours, "drain", "steady_jobs_per_s")
    peer_drain, peer = best(("drain", "steady_jobs_per_s"))
    limit = batched_limit(report)
    if drain and peer_drain:
        lines.append(f"- Drain >= 2x the fastest peer ({peer}, {peer_drain:,.0f}/s): "
                     f"{drain:,.0f}/s = {drain / peer_drain:.2f}x: "
                     f"{verdict(drain >= 2 * peer_drain)}.")
    if drain and limit:
        lines.append(f"- Drain >= half the batched pgbench limit ({limit:,.0f}/s, best 10 "
                     f"rows/txn): {drain / limit:.2f}x of it: {verdict(drain >= limit / 2)}.")
    bulk = _get(ours, "bulk", "jobs_per_s")
    peer_bulk, peer = best(("bulk", "jobs_per_s"))
    if bulk and peer_bulk:
        lines.append(f"- Bulk enqueue >= the fastest peer's ({peer}, {peer_bulk:,.0f}/s): "
                     f"{bulk:,.0f}/s = {bulk / peer_bulk:.2f}x: {verdict(bulk >= peer_bulk)}.")
    ratio = _get(ours, "enqueue", "ratio_vs_baseline")
    if ratio:
        lines.append(f"- Single enqueue within 1.2x of a bare create() in a transaction: "
                     f"{ratio:.2f}x: {verdict(ratio <= 1.2)}.")
    p50, p95 = _get(ours, "pickup", "p50_ms"), _get(ours, "pickup", "p95_ms")
    peer_p50, peer = best(("pickup", "p50_ms"), higher=False)
    if p50 and peer_p50:
        lines.append(f"- Pickup p50 no slower than the fastest peer ({peer}, {peer_p50:.1f} ms): "
                     f"{p50:.1f} ms = {p50 / peer_p50:.2f}x its time: "
                     f"{verdict(p50 <= peer_p50)}.")
    if p95:
        lines.append(f"- Pickup p95 under 10 ms: {p95:.1f} ms: {verdict(p95 < 10)}.")
    claim = _get(ours, "claim", "ratio")
    if claim:
        small, large = report["sizes"]["claim_finished"][:2]
        lines.append(f"- Claim with {_rows(large)} finished rows within 1.3x of {_rows(small)}: "
                     f"{claim:.2f}x: {verdict(claim <= 1.3)}.")
    memory = _get(ours, "memory")
    if isinstance(memory, dict) and "rss_mb_end" in memory:
        growth = memory["rss_mb_end"] - memory["rss_mb_start"]
        enough = memory["done"] >= 100_000
        lines.append(f"- Worker memory flat over 100k jobs: {growth:+.1f} MB over "
                     f"{memory['done']:,} jobs{'' if enough else ' (fewer than 100k: time cap)'}: "
                     f"{verdict(abs(growth) < 5) if enough else 'not shown'}.")
    return lines


def durability_lines(ours) -> list:
    """django-sqlqueue's extra lines: NOTIFY off, and what the WAL flush costs (the Redis peers
    do not wait for a disk)."""
    lines = []
    on, off = _get(ours, "enqueue16", "jobs_per_s"), _get(ours, "enqueue16_nonotify", "jobs_per_s")
    if on and off:
        lines += [f"django-sqlqueue enqueue from 16 processes: {on:,.0f} jobs/s with NOTIFY "
                  f"(the default), {off:,.0f} jobs/s with `SQLQUEUE = {{\"NOTIFY\": False}}`: "
                  f"{on / off:.2f}x.", ""]
    durable, fast = _get(ours, "enqueue", "jobs_per_s"), _get(ours, "enqueue_nosync", "jobs_per_s")
    if durable and fast:
        lines += [f"django-sqlqueue single enqueue in a transaction with `synchronous_commit = "
                  f"off` for the session (a commit does not wait for its WAL flush, as a Redis "
                  f"broker does not wait for a disk): {fast:,.0f} jobs/s against {durable:,.0f} "
                  f"with PostgreSQL's default ({fast / durable:.2f}x).", ""]
    p50, p95 = _get(ours, "pickup_nosync", "p50_ms"), _get(ours, "pickup_nosync", "p95_ms")
    if p50 and p95:
        lines += [f"django-sqlqueue pickup with the workers' `synchronous_commit = off` (the "
                  f"claim's commit does not wait for its WAL flush): p50 {p50:.1f} ms, p95 "
                  f"{p95:.1f} ms, against {_get(ours, 'pickup', 'p50_ms'):.1f} and "
                  f"{_get(ours, 'pickup', 'p95_ms'):.1f} ms with the default.", ""]
    return lines


def targets_redis(report, by_name) -> list:
    """The targets of issue 18 (against the fastest PostgreSQL peer and Celery + Redis), each
    with the numbers of this run."""
    ours = by_name.get("sqlqueue")
    if not ours or "error" in ours:
        return []
    lines = ["Targets of issue 18 (ratios from this run):", ""]

    def fastest(names, *path, higher=True):
        found = [(_get(by_name[n], *path), LABELS[n]) for n in names
                 if n in by_name and _get(by_name[n], *path) is not None]
        return (max if higher else min)(found) if found else (None, "?")

    def verdict(ok):
        return "met" if ok else "MISSED"

    pg_peers = [n for n in SYSTEMS if n not in REDIS_SYSTEMS and n != "sqlqueue"]
    celery = [n for n in ("celery", "celery_solo") if n in by_name]
    for path, what in ((("drain_long", "steady_jobs_per_s"), "long drain, once started"),
                       (("drain", "steady_jobs_per_s"), "drain, once started")):
        mine = _get(ours, *path)
        for group, name in ((pg_peers, "the fastest PostgreSQL peer"), (celery, "Celery")):
            theirs, who = fastest(group, *path)
            if mine and theirs:
                lines.append(f"- Drain >= 5x {name} ({what}; {who} {theirs:,.0f}/s): "
                             f"{mine:,.0f}/s = {mine / theirs:.2f}x: "
                             f"{verdict(mine >= 5 * theirs)}.")
    for key in ("p50_ms", "p95_ms"):
        mine = _get(ours, "pickup", key)
        theirs, who = fastest(celery, "pickup", key, higher=False)
        if mine and theirs:
            lines.append(f"- Pickup {key[:3]} within 1.5x of Celery's ({who} {theirs:.1f} ms): "
                         f"{mine:.1f} ms = {mine / theirs:.2f}x its time: "
                         f"{verdict(mine <= 1.5 * theirs)}.")
    for scenario, what in (("enqueue", "in a transaction"), ("enqueue_autocommit", "autocommit")):
        mine = _get(ours, scenario, "jobs_per_s")
        theirs, who = fastest(pg_peers, scenario, "jobs_per_s")
        if mine and theirs:
            lines.append(f"- Single enqueue {what} >= the fastest PostgreSQL peer ({who} "
                         f"{theirs:,.0f}/s): {mine:,.0f}/s = {mine / theirs:.2f}x: "
                         f"{verdict(mine >= theirs)}.")
        celery_rate = _get(by_name.get("celery", {}), scenario, "jobs_per_s")
        if mine and celery_rate:
            call = "delay_on_commit()" if scenario == "enqueue" else "delay()"
            lines.append(f"- Single enqueue {what} >= 0.9x Celery's `{call}` "
                         f"({celery_rate:,.0f}/s): {mine / celery_rate:.2f}x: "
                         f"{verdict(mine >= 0.9 * celery_rate)}.")
    on, off = _get(ours, "enqueue16", "jobs_per_s"), _get(ours, "enqueue16_nonotify", "jobs_per_s")
    if on and off:
        lines.append(f"- Enqueue from 16 processes with NOTIFY >= 0.95x without: {on:,.0f}/s vs "
                     f"{off:,.0f}/s = {on / off:.2f}x: {verdict(on >= 0.95 * off)}.")
    share = _get(ours, "drain_long", "startup_share")
    if share is not None:
        lines.append(f"- Long drain: start-up {share:.0%} of it (under 10% wanted).")
    return lines


def system_tables(results, metrics, report, reasons=False) -> list:
    """The table of every system's figures, then django-sqlqueue's ratio against each peer."""
    by_name = {r["system"]: r for r in results}
    names = [n for n in SYSTEMS if n in by_name]
    lines = []
    header = "| | " + " | ".join(LABELS[n] for n in names) + " |"
    lines += [header, "|" + "---|" * (len(names) + 1)]
    for metric in metrics:
        cells = " | ".join(cell(by_name[n], metric, reasons) for n in names)
        lines.append(f"| {metric_label(metric, report)} | {cells} |")
    lines.append("")
    # Ratios: ours against each peer, >1 means django-sqlqueue is better.
    ours = by_name.get("sqlqueue")
    peers = [n for n in names if n != "sqlqueue"]
    if ours and "error" not in ours and peers:
        lines.append("django-sqlqueue against each peer (above 1.00x: django-sqlqueue is better; "
                     "for times, the peer's time over ours):")
        lines.append("")
        lines.append("| | " + " | ".join(f"vs {LABELS[n]}" for n in peers) + " |")
        lines.append("|" + "---|" * (len(peers) + 1))
        for metric in metrics:
            _, path, _, higher = metric
            if path is None or higher is None:
                continue
            row = []
            for peer in peers:
                theirs = by_name[peer]
                row.append("n/a" if "error" in theirs else
                           ratio_text(_metric(ours, path), _metric(theirs, path), higher))
            lines.append(f"| {metric_label(metric, report)} | " + " | ".join(row) + " |")
        lines.append("")
    return lines


def baseline_lines(ours) -> list:
    """django-sqlqueue's single enqueue against a bare Django create() in a transaction."""
    if not ours or not _get(ours, "enqueue", "baseline_mean_ms"):
        return []
    return [
        "Single enqueue vs a bare Django `Order.objects.create()` in a transaction "
        f"(same run, interleaved): {_get(ours, 'enqueue', 'mean_ms'):.2f} ms vs "
        f"{_get(ours, 'enqueue', 'baseline_mean_ms'):.2f} ms mean per transaction = "
        f"{_get(ours, 'enqueue', 'ratio_vs_baseline'):.2f}x.",
        "",
    ]


def render_mariadb(phase, report) -> list:
    """The MariaDB phase's table, ratios and notes (its own section, after PostgreSQL's)."""
    if "server" not in phase:  # it never started
        return [f"On MariaDB: n/a: {phase.get('error', '?')}"]
    server = phase["server"]
    version = ".".join(server["version"].split(".")[:2])
    lines = [f"On MariaDB {version} (same run, one throwaway server at its default durability: "
             f"innodb_flush_log_at_trx_commit = {server['innodb_flush_log_at_trx_commit']}, "
             f"innodb_doublewrite = {server['innodb_doublewrite']}):", ""]
    lines += system_tables(phase["systems"], MARIADB_METRICS, report, reasons=True)
    lines += baseline_lines(next((r for r in phase["systems"] if r["system"] == "sqlqueue"
                                  and "error" not in r), None))
    lines += workflow_lines(phase["systems"], LABELS, report["sizes"])
    notes = ["django-sqlqueue wakes its workers by polling on MariaDB (no NOTIFY); each system "
             "at its defaults, the same worker process count as on PostgreSQL."]
    if "error" in phase:  # it failed after some systems ran
        notes.append(phase["error"])
    for result in phase["systems"]:
        if "error" in result:
            notes.append(f"{result['label']}: n/a: {result['error']}")
        for scenario in MARIADB_SCENARIOS:
            error = _get(result, scenario, "error")
            if error:
                notes.append(f"{result['label']} {scenario}: n/a: {error.splitlines()[0]}")
    return lines + [f"- {note}" for note in notes]


def render(report) -> str:
    results = report["systems"]
    by_name = {r["system"]: r for r in results}
    ours = by_name.get("sqlqueue")
    peers = [n for n in SYSTEMS if n in by_name and n != "sqlqueue"]
    lines = system_tables(results, METRICS, report)
    lines += baseline_lines(ours)
    queue_drain = _get(ours, "drain_queue") if ours else None
    if isinstance(queue_drain, dict) and "error" not in queue_drain:
        lines.append(
            "django-sqlqueue drain with `runworker --queue default --processes 2` (its claim "
            f"walks the per-queue ready index): {queue_drain['jobs_per_s']:,.0f} jobs/s incl. "
            "start-up, "
            f"{queue_drain.get('steady_jobs_per_s') or 0:,.0f} once started"
            f"{'' if queue_drain['completed'] else ' (time cap)'}, against "
            f"{_get(ours, 'drain', 'steady_jobs_per_s') or 0:,.0f} once started for the default "
            "worker (every queue)."
        )
        lines.append("")
    memory = _get(ours, "memory") if ours else None
    if isinstance(memory, dict) and "error" not in memory:
        lines.append(
            f"django-sqlqueue worker memory, 1 process (`runworker`), {memory['done']:,} jobs "
            f"in {memory['seconds']:.0f}s{'' if memory['completed'] else ' (time cap)'}, about "
            f"{memory['backlog']:,} kept ready: {memory['rss_mb_start']:.1f} MB after start-up "
            f"→ {memory['rss_mb_end']:.1f} MB at the end."
        )
        lines.append("")
    if ours and "error" not in ours:
        lines += durability_lines(ours)
    if report.get("pgbench"):
        lines.append("The physical limit: pgbench running the bare claim-and-complete SQL (no "
                     "Python) on django-sqlqueue's table, and on a minimal job table:")
        lines.append("")
        lines.append("| pgbench script | jobs/s | latency per batch (ms) | WAL per job (bytes) |")
        lines.append("|---|---|---|---|")
        for row in report["pgbench"]:
            jobs = f"{row['jobs_per_s']:,.0f}" if "jobs_per_s" in row else "error"
            latency = f"{row['latency_ms']:.2f}" if row.get("latency_ms") else ""
            wal = f"{row['wal_bytes_per_job']:,}" if row.get("wal_bytes_per_job") else ""
            lines.append(f"| {row['label']} | {jobs} | {latency} | {wal} |")
        lines.append("")
    if ours and "error" not in ours:
        pg_peers = [by_name[n] for n in peers if n not in REDIS_SYSTEMS]
        lines += targets(report, ours, pg_peers) + [""]
        lines += targets_redis(report, by_name) + [""]
    lines += workflow_lines(results, LABELS, report["sizes"])
    notes = ["`*`: the drain hit its time cap before the queue was empty; the rate is jobs done "
             "over the time taken.",
             "Commit probe: 100 one-row autocommit INSERTs on the system's database just before "
             "its scenarios; it shows what a commit (a WAL flush) cost at that moment, so a "
             "system measured while the machine was busier can be told apart."]
    for result in results:
        if "error" in result:
            notes.append(f"{result['label']}: n/a: {result['error']}")
        notes += result.get("notes", [])
        for scenario in ("enqueue", "bulk", "drain", "pickup", "claim", "drain_queue", "memory",
                         "enqueue_autocommit", "enqueue16", "enqueue16_nonotify", "drain_long",
                         "drain_write", "drain_transactional", "enqueue_nosync",
                         "pickup_nosync"):
            error = _get(result, scenario, "error")
            if error:
                notes.append(f"{result['label']} {scenario}: error: {error.splitlines()[0]}")
    lines += [f"- {note}" for note in notes]
    if report.get("mariadb"):
        lines += [""] + render_mariadb(report["mariadb"], report)
    return "\n".join(lines)


def chart(report, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_name = {r["system"]: r for r in report["systems"] if "error" not in r}
    names = [n for n in SYSTEMS if n in by_name]
    labels = [LABELS[n] for n in names]
    colors = ["#d62728" if n == "sqlqueue" else "#7f7f7f" for n in names]
    panels = [
        ("Drain, 2 workers (jobs/s, once started)", ("drain", "steady_jobs_per_s")),
        ("Bulk enqueue (jobs/s)", ("bulk", "jobs_per_s")),
        ("Enqueue, 1 job per transaction (jobs/s)", ("enqueue", "jobs_per_s")),
        ("Pickup latency p50 (ms, log scale)", ("pickup", "p50_ms")),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for ax, (title, keys) in zip(axes.flat, panels, strict=True):
        values = [_get(by_name[n], *keys) or 0 for n in names]
        bars = ax.barh(labels, values, color=colors)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=11)
        if "log" in title:
            ax.set_xscale("log")
        for bar, value in zip(bars, values, strict=True):
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                    f" {value:,.0f}" if value >= 10 else f" {value:,.1f}", va="center",
                    fontsize=9)
        if keys[0] == "drain":
            best = batched_limit(report)
            if best:
                ax.axvline(best, color="#1f77b4", linestyle="--", linewidth=1)
                ax.set_title(f"{title}\ndashed: pgbench, bare SQL, 10 rows/txn ({best:,.0f})",
                             fontsize=10)
        ax.margins(x=0.25)
    fig.suptitle(
        "django-sqlqueue and peers on PostgreSQL "
        f"{report['postgres'].get('server_version', '?').split()[0]}"
        f" (fsync on), {report['machine'].get('cores')} cores, {report['date'][:10]}",
        fontsize=12,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="comma-separated subset of: " + ", ".join(SYSTEMS))
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes, to check that everything runs (numbers meaningless)")
    parser.add_argument("--no-pgbench", action="store_true")
    parser.add_argument("--no-mariadb", action="store_true",
                        help="skip the MariaDB phase (" + ", ".join(MARIADB_SYSTEMS) + ")")
    parser.add_argument("--scenarios", help="comma-separated scenarios to run instead of each "
                        "system's own list; a name given twice runs twice (a, a#2, ...)")
    parser.add_argument("--chart", default=str(ROOT / "docs" / "images" / "benchmarks.png"))
    # 600 s: the workflow scenarios (fanin, chain) add about a minute to django-sqlqueue and Celery.
    parser.add_argument("--system-timeout", type=float, default=600)
    parser.add_argument("--render", metavar="RESULTS_JSON",
                        help="print the table of an earlier run again (and redraw its chart)")
    args = parser.parse_args()
    if args.render:
        report = json.loads(Path(args.render).read_text())
        say(render(report))
        chart(report, Path(args.chart))
        return
    started = time.monotonic()
    sizes = QUICK_SIZES if args.quick else SIZES
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    outdir = HERE / "results" / stamp
    outdir.mkdir(parents=True, exist_ok=True)
    cluster = BenchCluster()
    names = args.systems.split(",")
    redis = RedisServer() if set(names) & set(REDIS_SYSTEMS) else None
    report = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "sizes": sizes, "quick": args.quick,
              "django_sqlqueue_checkout": checkout(), "load_at_start": round(loadavg(), 2)}
    say(f"==> PostgreSQL: starting a throwaway cluster in {cluster.base} (fsync on)")
    try:
        cluster.start()
        cluster.wait_ready()
        report["postgres"] = cluster.settings()
        say(f"    {report['postgres']}")
        if redis:
            redis.start()
            report["redis"] = {"version": redis.version(), "port": redis.port,
                               "config": "built-in defaults (no config file)"}
            say(f"==> Redis {report['redis']['version']}: a throwaway redis-server on port "
                f"{redis.port} ({redis.base})")
        report["systems"] = []
        for name in names:
            say(f"==> {LABELS[name]}")
            report["systems"].append(
                run_system(cluster, name, sizes, outdir, args.system_timeout, redis,
                           args.scenarios.split(",") if args.scenarios else None)
            )
            if "error" in report["systems"][-1]:
                say(f"    n/a: {report['systems'][-1]['error']}")
        if not args.no_pgbench:
            say("==> pgbench: the bare claim-and-complete SQL")
            report["pgbench"] = run_pgbench(cluster, outdir, 5 if args.quick else 8)
    finally:
        cluster.destroy()
        if redis:
            redis.stop()
    on_mariadb = [name for name in names if name in MARIADB_SYSTEMS]
    if on_mariadb and not args.no_mariadb:
        report["mariadb"] = run_mariadb(on_mariadb, sizes, outdir, args.system_timeout,
                                        args.scenarios.split(",") if args.scenarios else None)
    report["total_seconds"] = round(time.monotonic() - started, 1)
    report["load_at_end"] = round(loadavg(), 2)
    (outdir / "results.json").write_text(json.dumps(report, indent=1))
    (HERE / "results" / "latest.json").write_text(json.dumps(report, indent=1))
    table = render(report)
    (outdir / "table.md").write_text(table + "\n")
    chart(report, Path(args.chart))
    say("")
    say(table)
    say("")
    say(f"Results: {outdir / 'results.json'}; chart: {args.chart}")
    say(f"django-sqlqueue at {report['django_sqlqueue_checkout']}; "
        f"benchmark time: {report['total_seconds']:.0f}s (load average at start "
        f"{report['load_at_start']}, at end {report['load_at_end']})")


if __name__ == "__main__":
    main()
