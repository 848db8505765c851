"""The measuring code every driver shares. Runs inside each system's own virtualenv, so it needs
nothing but the standard library and psycopg 3 (which every system here installs), or mysqlclient
for a system measured on MariaDB (``dialects.py`` holds what differs between the two).

A driver (``benchmarks/systems/<name>.py``) subclasses :class:`System` and fills in the hooks;
``python -m benchmarks.driver <name>`` then runs the scenarios below against it and prints one
JSON object on stdout. Everything is timed with ``time.perf_counter`` in this process; workers
are real subprocesses started the way the system's documentation says to start them.
"""

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import dialects
from .processes import ROOT, Workers, log, percentile, tree_rss


# ---- the system interface -----------------------------------------------------------------------
class System:
    """Hooks a driver fills in. ``dsn`` is the URL of this system's own fresh database:
    ``postgresql://...`` or, in the MariaDB phase, ``mysql://...``."""

    name = "?"
    label = "?"
    #: Extra notes printed under the table (API limits, how something was measured).
    notes: list = []

    def __init__(self, dsn: str, logdir: Path):
        self.dsn = dsn
        self.logdir = logdir

    def version(self) -> str:
        raise NotImplementedError

    def setup(self) -> None:
        """Create the schema (migrations / install)."""

    def reset(self) -> None:
        """Delete every job, so the next scenario starts from an empty queue."""

    def unfinished_sql(self) -> str:
        """SQL returning one number: jobs not finished yet."""
        raise NotImplementedError

    def enqueue_one(self, i: int) -> None:
        """Enqueue one no-op job in its own transaction, the way a web request would."""
        raise NotImplementedError

    def bulk_enqueue(self, n: int) -> None:
        """Enqueue ``n`` no-op jobs with the system's bulk API (or what it offers)."""
        raise NotImplementedError

    def prefill(self, n: int) -> None:
        """Put ``n`` no-op jobs in the queue before a drain (untimed). Drivers whose enqueue API
        is slow insert rows with plain SQL shaped like the ones their API writes."""
        self.bulk_enqueue(n)

    def enqueue_pickup(self, key: int) -> None:
        """Enqueue one job that calls ``record_pickup(key)``, in its own transaction."""
        raise NotImplementedError

    #: Whether ``enqueue_one_autocommit`` exists (the scenario is skipped otherwise).
    has_autocommit_enqueue = False

    def enqueue_one_autocommit(self, i: int) -> None:
        """Enqueue one no-op job outside any transaction block: Django's autocommit, Celery's
        ``delay()``, RQ's ``enqueue()``."""
        raise NotImplementedError

    def unfinished_count(self):
        """Jobs not finished yet, for systems whose queue is not in PostgreSQL (Redis); ``None``
        means: run ``unfinished_sql()`` on the system's database."""
        return None

    #: Whether ``prefill_write`` exists: jobs that each insert one ``benchapp_order`` row.
    has_write_jobs = False

    def prefill_write(self, n: int) -> None:
        """Put ``n`` jobs in the queue that each do one small database write (untimed)."""
        raise NotImplementedError

    def set_synchronous_commit(self, on: bool) -> None:
        """Turn ``synchronous_commit`` off or back on for the enqueuing session (the
        ``enqueue_nosync`` scenario, django-sqlqueue only)."""
        raise NotImplementedError

    def after_fork(self) -> None:
        """Called in an enqueuing process of the concurrent-enqueue scenario before it starts."""

    def worker_specs(self, processes: int, **options) -> list:
        """[(argv, env)] of the processes that make ``processes`` workers, as documented."""
        raise NotImplementedError

    #: Whether ``baseline_one`` exists: a bare Django ``create()`` of a small row in a transaction.
    has_baseline = False

    def baseline_one(self, i: int) -> None:
        pass

    # Optional scenario: return False when the system cannot take part (reason in ``notes``).

    def claim_setup(self, ready: int) -> bool:
        return False

    def add_finished(self, n: int) -> None:
        raise NotImplementedError

    def claim_one(self):
        raise NotImplementedError

    def close(self) -> None:
        pass


# ---- scenarios ----------------------------------------------------------------------------------
class Runner:
    def __init__(self, system: System, sizes: dict):
        self.system = system
        self.sizes = sizes
        self.vendor = dialects.vendor_of(system.dsn)
        self.conn = dialects.connect(system.dsn)

    def unfinished(self) -> int:
        count = self.system.unfinished_count()
        if count is not None:
            return count
        return self.conn.execute(self.system.unfinished_sql()).fetchone()[0]

    def sql(self, statement: str):
        self.conn.execute(statement)

    # the machine's state: what one commit costs right now ---------------------------------------
    def commit_probe(self, n=100) -> dict:
        """The same tiny autocommit INSERT for every system, before its scenarios: other work on
        the machine (a busy disk above all) shows up here, so results can be read against it."""
        self.sql(dialects.PROBE_TABLE[self.vendor])
        times = []
        for _ in range(n):
            started = time.perf_counter()
            self.conn.execute(dialects.PROBE_INSERT)
            times.append(time.perf_counter() - started)
        self.sql("DROP TABLE bench_probe")
        return {"n": n, "mean_ms": statistics.mean(times) * 1000,
                "p50_ms": percentile(times, 50) * 1000, "p95_ms": percentile(times, 95) * 1000}

    # enqueue, one job per transaction --------------------------------------------------------
    def _size(self, key):
        value = self.sizes[key]
        if isinstance(value, dict):
            return value.get(self.system.name, value["default"])
        return value

    def enqueue_single(self, autocommit: bool = False, durable: bool = True) -> dict | None:
        """With ``durable=False``, the system's session runs with ``synchronous_commit = off``:
        a commit no longer waits for its WAL flush, the durability of a Redis broker."""
        n = self.sizes["single_enqueue"]
        system = self.system
        if autocommit and not system.has_autocommit_enqueue:
            return None
        if not durable:
            system.set_synchronous_commit(False)
        enqueue = system.enqueue_one_autocommit if autocommit else system.enqueue_one
        for i in range(20):  # warm up connections and caches
            enqueue(i)
            system.baseline_one(i)
        system.reset()
        times, base_times = [], []
        for i in range(n):
            # Interleaved with the baseline, so both see the same disk and the same moment.
            started = time.perf_counter()
            enqueue(i)
            times.append(time.perf_counter() - started)
            started = time.perf_counter()
            if system.has_baseline:
                system.baseline_one(i)
                base_times.append(time.perf_counter() - started)
        result = {
            "n": n,
            "jobs_per_s": n / sum(times),
            "mean_ms": statistics.mean(times) * 1000,
            "p50_ms": percentile(times, 50) * 1000,
            "p95_ms": percentile(times, 95) * 1000,
        }
        if base_times and len(base_times) == n:
            result["baseline_mean_ms"] = statistics.mean(base_times) * 1000
            result["baseline_p50_ms"] = percentile(base_times, 50) * 1000
            result["ratio_vs_baseline"] = statistics.mean(times) / statistics.mean(base_times)
        if not durable:
            system.set_synchronous_commit(True)
        system.reset()
        return result

    # bulk enqueue ----------------------------------------------------------------------------
    def bulk(self, prepared: bool = False) -> dict:
        """``prepared``: django-sqlqueue's ``bulk_enqueue`` of prepared jobs instead of its
        bulk API of one task's calls (``enqueue_many``)."""
        n = self._size("bulk_enqueue")
        enqueue = self.system.bulk_enqueue_prepared if prepared else self.system.bulk_enqueue
        enqueue(min(n, 1000))  # warm-up
        self.system.reset()
        started = time.perf_counter()
        enqueue(n)
        elapsed = time.perf_counter() - started
        count = self.unfinished()
        self.system.reset()
        return {"n": n, "seconds": elapsed, "jobs_per_s": n / elapsed, "inserted": count}

    # drain -----------------------------------------------------------------------------------
    def drain(self, n: int, processes: int, cap: float, label: str = "drain", *,
              feed: int | None = None, write: bool = False, work: bool = False,
              **worker_options) -> dict | None:
        """Run ``processes`` workers over ``n`` no-op jobs. With ``feed``, the queue is not filled
        up front but kept at about ``feed`` ready jobs, topped up as the workers take them (the
        memory scenario: many jobs through one worker, without a huge backlog). With ``write``,
        each job inserts one ``benchapp_order`` row instead, and a job counts as done once its
        row is committed (the same measure for every system, whatever its queue). With
        ``work``, the database's work per job too (PostgreSQL: WAL bytes, rows written)."""
        system = self.system
        if write and not system.has_write_jobs:
            return None
        system.reset()
        inserted = min(n, 2 * feed) if feed else n
        if write:
            self.sql("TRUNCATE benchapp_order")
            system.prefill_write(inserted)

            def unfinished():
                return inserted - self.conn.execute(
                    "SELECT count(*) FROM benchapp_order").fetchone()[0]
        else:
            system.prefill(inserted)
            unfinished = self.unfinished
        dialects.settle(self.conn, self.vendor)
        counters = dialects.write_counters(self.conn, self.vendor) if work else None
        samples = []  # (seconds since start, done)
        memory = []  # (done, MB summed over the worker tree, {pid: MB})
        workers = Workers(system.worker_specs(processes, **worker_options), system.logdir, label)
        started = time.perf_counter()
        next_memory = 0.0
        try:
            while True:
                now = time.perf_counter() - started
                unfinished_now = unfinished()
                done = inserted - unfinished_now
                samples.append((now, done))
                if now >= next_memory:
                    per_pid = tree_rss(workers.pids)
                    memory.append((done, round(sum(per_pid.values()), 1), per_pid))
                    next_memory = now + 1.0
                if done >= n or now > cap:
                    break
                if not workers.alive():
                    log(f"{label}: a worker process exited early; see {system.logdir}")
                    break
                if feed and unfinished_now < feed and inserted < n:
                    more = min(feed, n - inserted)
                    system.prefill(more)
                    inserted += more
                time.sleep(0.05)
        finally:
            workers.stop()
        total = n
        elapsed, done = samples[-1]
        result = {
            "n": total, "processes": processes, "done": done, "seconds": elapsed,
            "backlog": feed or total, **worker_options,
            "completed": done >= total, "jobs_per_s": done / elapsed if elapsed else None,
            # (jobs prefilled by the feed count too: their inserts are in the measure)
            **dialects.work_per_job(self.conn, counters, done),
        }
        # "Once started": the rate between 10% and 90% done (or over what was done at the cap).
        first = next((s for s in samples if s[1] >= 0.1 * total), None)
        last = next((s for s in samples if s[1] >= 0.9 * total), samples[-1])
        if first is not None and last[0] > first[0]:
            result["steady_jobs_per_s"] = (last[1] - first[1]) / (last[0] - first[0])
        first_done = next((s for s in samples if s[1] > 0), None)
        result["first_job_after_s"] = first_done[0] if first_done else None
        if first_done and elapsed:
            # Start-up's share of the drain: a drain is long enough when this is under 10%.
            result["startup_share"] = first_done[0] / elapsed
        if memory:
            result["rss_mb_start"] = memory[min(1, len(memory) - 1)][1]
            result["rss_mb_end"] = memory[-1][1]
            result["rss_samples"] = [(d, mb) for d, mb, _ in memory]
            result["processes_sampled"] = len(memory[-1][2])
        system.reset()
        return result

    # concurrent enqueue from many processes ------------------------------------------------
    def enqueue_concurrent(self, config: dict, env: dict | None = None) -> dict:
        """``processes`` processes (each a fresh interpreter running this system's driver) enqueue
        ``per_process`` jobs each, one per transaction, all starting at one signal: jobs/s over
        the wall time from the signal to the last one done. Web processes enqueueing at once;
        with NOTIFY, every commit also takes PostgreSQL's notification-queue lock."""
        processes = self.sizes["concurrent_processes"]
        per_process = self.sizes["concurrent_per_process"]
        self.system.reset()
        argv = [sys.executable, "-m", "benchmarks.driver", self.system.name, json.dumps(config),
                "--enqueue-many", str(per_process)]
        procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, cwd=ROOT, env={**os.environ, **(env or {})})
                 for _ in range(processes)]
        try:
            for proc in procs:  # each says "ready" once connected and warmed up
                line = proc.stdout.readline().strip()
                if line != "ready":
                    raise RuntimeError(f"an enqueuing process failed to start: {line!r}")
            self.system.reset()  # the warm-up jobs
            started = time.perf_counter()
            for proc in procs:
                proc.stdin.write("go\n")
                proc.stdin.flush()
            latencies = []
            for proc in procs:
                out = json.loads(proc.stdout.readline())
                latencies += out["times"]
            elapsed = time.perf_counter() - started
        finally:
            for proc in procs:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
                proc.wait(30)
        total = processes * per_process
        result = {"processes": processes, "per_process": per_process, "seconds": elapsed,
                  "jobs_per_s": total / elapsed, "enqueued": self.unfinished(),
                  "p50_ms": percentile(latencies, 50) * 1000,
                  "p95_ms": percentile(latencies, 95) * 1000}
        self.system.reset()
        return result

    # pickup latency --------------------------------------------------------------------------
    def pickup(self, worker_env: dict | None = None, label: str = "pickup") -> dict:
        system = self.system
        rate, count = self.sizes["pickup_rate"], self.sizes["pickup_jobs"]
        system.reset()
        fd, path = tempfile.mkstemp(prefix="pickup-", suffix=".txt")
        os.close(fd)
        os.chmod(path, 0o666)
        specs = [(argv, {**env, **(worker_env or {}), "BENCH_PICKUP_FILE": path})
                 for argv, env in system.worker_specs(self.sizes["processes"])]
        workers = Workers(specs, system.logdir, label)
        try:
            # Warm-up: the workers are up once these ran; then let them fall idle.
            for key in range(-5, 0):
                system.enqueue_pickup(key)
            deadline = time.monotonic() + 60
            while self.unfinished() and time.monotonic() < deadline and workers.alive():
                time.sleep(0.1)
            if not workers.alive() or self.unfinished():
                raise RuntimeError(f"the workers did not run the warm-up jobs; see {system.logdir}")
            time.sleep(2.0)
            committed = {}
            next_at = time.perf_counter()
            for key in range(count):
                next_at += random.expovariate(rate)  # Poisson arrivals at `rate` per second
                pause = next_at - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                system.enqueue_pickup(key)
                committed[key] = time.time()
            deadline = time.monotonic() + 15
            while self.unfinished() and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            workers.stop()
        started = {}
        text = Path(path).read_text().splitlines()
        os.unlink(path)
        for line in text:
            key, at = line.split()
            started.setdefault(int(key), float(at))
        latencies = [(started[k] - committed[k]) * 1000 for k in committed if k in started]
        system.reset()
        return {
            "jobs": count, "rate_per_s": rate, "picked": len(latencies),
            "p50_ms": percentile(latencies, 50), "p95_ms": percentile(latencies, 95),
            "p99_ms": percentile(latencies, 99),
            "max_ms": max(latencies) if latencies else None,
        }

    # claim time vs finished rows -------------------------------------------------------------
    def claim_time(self) -> dict | None:
        system = self.system
        system.reset()
        ready = self.sizes["claim_ready"]
        if not system.claim_setup(ready):
            return None
        result = {"ready_jobs": ready}
        have = 0
        for which, finished in zip(("small", "large"), self._size("claim_finished"), strict=True):
            log(f"claim time: filling to {finished:,} finished rows")
            system.add_finished(finished - have)
            have = finished
            dialects.settle(self.conn, self.vendor, checkpoint=False)
            times = []
            stop_at = time.perf_counter() + self.sizes["claim_cap_s"]
            for index in range(self.sizes["claim_samples"]):
                if index >= 20 and time.perf_counter() > stop_at:
                    break  # slow claims: enough samples for a median
                started = time.perf_counter()
                system.claim_one()
                times.append(time.perf_counter() - started)
            result[which] = {
                "finished_rows": finished,
                "p50_ms": percentile(times, 50) * 1000,
                "mean_ms": statistics.mean(times) * 1000,
                "p95_ms": percentile(times, 95) * 1000,
                "samples": len(times),
            }
            system.claim_setup(ready)  # put the claimed jobs back / top the ready jobs up
        result["ratio"] = result["large"]["p50_ms"] / result["small"]["p50_ms"]
        system.reset()
        return result


def run(system: System, sizes: dict, scenarios: list, config: dict) -> dict:
    out = {"system": system.name, "label": system.label, "version": system.version(),
           "python": sys.version.split()[0], "notes": list(system.notes)}
    log(f"{system.label} {out['version']}: setup")
    system.setup()
    runner = Runner(system, sizes)
    out["commit_probe"] = runner.commit_probe()
    log(f"{system.label}: commit probe {json.dumps(_short(out['commit_probe']))}")
    for scenario in scenarios:
        if scenario in out:  # a scenario run again (run.py --scenarios a,b,a,b): "a#2", ...
            key = next(f"{scenario}#{k}" for k in range(2, 100) if f"{scenario}#{k}" not in out)
            out[key] = _run_one(runner, system, scenario, sizes, config)
            log(f"{system.label}: {key}: {json.dumps(_short(out[key]))}")
            continue
        log(f"{system.label}: {scenario}")
        started = time.perf_counter()
        out[scenario] = _run_one(runner, system, scenario, sizes, config)
        log(f"{system.label}: {scenario} took {time.perf_counter() - started:.1f}s: "
            f"{json.dumps(_short(out.get(scenario)))}")
    system.close()
    return out


def _run_one(runner, system, scenario, sizes, config):
    """One scenario's result (or ``{"error": ...}``: reported, not fatal)."""
    processes, cap = sizes.get("processes"), sizes.get("drain_cap_s")
    try:
        if scenario == "enqueue":
            return runner.enqueue_single()
        if scenario == "enqueue_autocommit":
            return runner.enqueue_single(autocommit=True)
        if scenario == "enqueue_nosync":  # what the WAL flush costs the enqueue
            return runner.enqueue_single(durable=False)
        if scenario in ("enqueue16", "enqueue16_nonotify"):
            env = {"BENCH_SQLQUEUE_NOTIFY": "0"} if scenario.endswith("nonotify") else {}
            return runner.enqueue_concurrent(config, env)
        if scenario == "bulk":
            return runner.bulk()
        if scenario == "bulk_prepared":  # django-sqlqueue: Job.objects.bulk_enqueue
            return runner.bulk(prepared=True)
        if scenario == "drain":
            return runner.drain(runner._size("drain"), processes, cap, work=True)
        if scenario == "drain_long":  # start-up under 10% of the drain
            return runner.drain(runner._size("drain_long"), processes,
                                sizes["drain_long_cap_s"], label=scenario)
        if scenario == "drain_write":  # each job inserts one row
            return runner.drain(runner._size("drain_write"), processes, cap, label=scenario,
                                write=True)
        if scenario == "drain_queue":  # django-sqlqueue: the drain with runworker --queue
            return runner.drain(runner._size("drain"), processes, cap, label=scenario,
                                queue="default")
        if scenario == "drain_transactional":  # django-sqlqueue: drain_write's jobs, run by
            return _drain_transactional(runner, system, sizes, processes, cap)  # the lane
        if scenario == "drain_keyed":  # django-sqlqueue: the drain, a per-key limit in force
            keys, key_limit = sizes.get("drain_keys", 100), sizes.get("drain_key_limit", 2)
            system.limit_keys(keys, key_limit)
            try:
                return {**runner.drain(runner._size("drain"), processes, cap, label=scenario),
                        "keys": keys, "key_limit": key_limit}
            finally:
                system.limit_keys(None, None)
        if scenario == "memory":
            return runner.drain(runner._size("memory"), 1, sizes["memory_cap_s"],
                                label=scenario, feed=sizes["memory_backlog"])
        if scenario == "pickup":
            return runner.pickup()
        if scenario == "pickup_nosync":  # what the claim's WAL flush costs the pickup
            return runner.pickup({"BENCH_SYNCHRONOUS_COMMIT": "off"}, scenario)
        if scenario == "claim":
            return runner.claim_time()
        from . import workflows  # fanin, chain (issue 26)

        if scenario in workflows.SCENARIOS:
            return workflows.SCENARIOS[scenario](runner)
    except Exception as exc:  # reported, not fatal: the other scenarios still run
        import traceback

        traceback.print_exc()
        return {"error": f"{type(exc).__name__}: {exc}"}
    raise ValueError(f"unknown scenario {scenario!r}")


def _drain_transactional(runner, system, sizes, processes, cap) -> dict:
    """drain_write's jobs made transactional (each row committed with its job's completion), run
    by the workers' transactional lane, ``transactional_batch`` jobs per transaction; then,
    with a quarter as many jobs, each ``[batch, lanes per process]`` of
    ``transactional_sweep`` (its rate once started, or overall)."""
    batch = sizes.get("transactional_batch", 64)
    n = runner._size("drain_write")
    system.transactional = True
    try:
        result = runner.drain(n, processes, cap, label="drain_transactional", write=True,
                              transactional_batch=batch)
        sweep = {}
        for size, lanes in sizes.get("transactional_sweep", []):
            swept = runner.drain(max(n // 4, 100), processes, cap, write=True,
                                 label=f"drain_transactional_{size}x{lanes}",
                                 transactional_batch=size, transactional_lanes=lanes)
            sweep[f"batch {size}, {lanes} lane(s)"] = round(
                swept.get("steady_jobs_per_s") or swept["jobs_per_s"] or 0)
        return {**result, "sweep": sweep}
    finally:
        system.transactional = False


def _short(value):
    if isinstance(value, dict):
        return {k: _short(v) for k, v in value.items() if k != "rss_samples"}
    if isinstance(value, float):
        return round(value, 2)
    return value
