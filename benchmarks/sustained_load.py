"""Sustained load with and without a long transaction: what dead rows do to claims and pickup.

    python benchmarks/sustained_load.py [--minutes 10] [--after-minutes 0]
        [--variants tuned,untuned] [--capacity JOBS_PER_S] [--share 0.5] [--no-transaction]
        [--plot PATH]

(the virtualenv of run.sh, ``benchmarks/.venvs/sqlqueue``, which has matplotlib; any virtualenv
with django-sqlqueue's ``postgres`` extra runs it without ``--plot``). Starts a throwaway
PostgreSQL with the benchmark's durability (fsync on, ``pg.py``) and pg_stat_statements, then for
each variant, on a fresh database:

1. **capacity** (before the first variant only, unless given by ``--capacity``: every variant
   runs at the same load): 20,000 ready no-op jobs (``INSERT ... SELECT generate_series``),
   drained by two ``runworker`` processes (``--processes 2``); the drain rate, from the first to
   the last claim, the median of three such drains, is this machine's capacity right now.
2. **load**: the same two workers, started again, while this script enqueues at half that rate
   (``--share``; a batch every 100 ms, one INSERT with ``pg_notify`` per batch, as
   ``bulk_enqueue`` does) for
   ``--minutes`` minutes alone (*quiet*), then ``--minutes`` more with, from a quarter to three
   quarters of them, a transaction held open by another session: ``BEGIN ISOLATION LEVEL
   REPEATABLE READ; SELECT txid_current(); SELECT count(*) FROM django_sqlqueue_job;`` then idle
   in transaction until it commits; ``--after-minutes`` more minutes after that phase watch the
   recovery (7.5 with ``--minutes 10``: the 10 minutes after the transaction). The workers
   prune succeeded jobs older than 60 seconds (``KEEP_SUCCEEDED_SECONDS``), looking every 10 s
   (``PRUNE_INTERVAL_SECONDS``), so the table has a steady size when vacuum keeps up. With
   ``--no-transaction`` no transaction is held: issue 41's sustained run (``--minutes 15
   --share 0.8 --no-transaction``: 30 minutes at 0.8x the capacity), whose summary says whether
   the workers kept up (the backlog at the end, and the jobs finished against those enqueued).

Variants: ``tuned`` is the job table as migration 0011 leaves it (its storage parameters, see
``sql.job_table_storage_parameters``); ``untuned`` resets them to PostgreSQL's defaults first.

Every second it records: **claim time**: p50 and p95 of ten probes a second of the bounded
read (``ready_ids_after``, db/base.py: ready rows after a position in claim order, the workers'
LIMIT of 10), the read the workers use while their claims from the front are slow
(claim/bounded.py); one probe of the full read (ready rows from the front of the order,
``ready_ids``, through the index ``sqlqueue_job_ready_any_queue``), as a worker claims at
least once a second; and from pg_stat_statements the workers' mean claim statement time, of
all their claims and of each kind, and the share of bounded ones; **pickup latency** (p50 and
p95 of ``claimed_at - enqueued_at`` of the jobs enqueued two seconds earlier, read by id); the
**backlog** (ready jobs); **dead and live tuples** (``pg_stat_user_tables``); the **table and
index sizes** (``pg_relation_size``, ``pg_indexes_size``). Prints a summary per phase (quiet, the
long transaction, the minute after it, the rest) and writes the samples as JSON next to the plot.
"""

import argparse
import json
import statistics
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

DRIVER = "sustained-load-driver"  # this script's own connections
TASK = "benchmarks.benchapp.tasks.noop"
TABLE = "django_sqlqueue_job"
#: Succeeded jobs pruned 60 s after they finished, looked for every 10 s: with the default
#: PRUNE_INTERVAL_SECONDS (600) nothing is pruned for the first 10 minutes, and the first pass
#: then deletes 2.5 million rows while the phase after it is measured (it did, in two runs).
WORKER_SETTINGS = {"KEEP_SUCCEEDED_SECONDS": 60, "PRUNE_INTERVAL_SECONDS": 10}
#: ``--no-prune``: succeeded jobs kept, so that a run shows the load without the prune's writes
#: (the insert, the claim and the outcome alone), the floor that no way of pruning goes below.
NO_PRUNE_SETTINGS = {"KEEP_SUCCEEDED_SECONDS": None}
TICK = 0.1  # seconds between two enqueued batches
PAYLOAD = "jsonb_build_object('args', jsonb_build_array(i), 'kwargs', '{}'::jsonb)"
ENQUEUE = (f"WITH inserted AS (INSERT INTO {TABLE} (task_name, payload) "  # noqa: S608
           f"SELECT '{TASK}', {PAYLOAD} FROM generate_series(1, %s) AS i RETURNING id) "
           "SELECT min(id), max(id), pg_notify('django_sqlqueue', 'default') FROM inserted")
#: The claim's read as the workers run it (ready_ids, every queue): the first ready rows in
#: claim order. Without FOR UPDATE, so that the probe takes no job from the workers; stepping
#: over dead index entries costs the same. This is the full read, from the front of the order.
READY = ("FROM django_sqlqueue_job WHERE status IN ('queued', 'failed') AND run_at <= now() "
         "AND (expires_at IS NULL OR expires_at > now())")
CLAIM_PROBE = f"SELECT priority, run_at, id {READY} ORDER BY priority DESC, run_at, id LIMIT 10"
#: The bounded read (ready_ids_after) the workers use while full claims are slow
#: (claim/bounded.py): the rows after a position in claim order. The probe's position is
#: the first row its previous read found, about 100 ms old: a worker's is its last claimed job,
#: a few ms old, so the probe steps over more claimed entries than a worker does.
BOUNDED_PROBE = (
    f"SELECT * FROM (SELECT * FROM (SELECT priority, run_at, id {READY} "  # noqa: S608
    "AND priority = %s AND (run_at, id) > (%s, %s) ORDER BY run_at, id LIMIT 10) AS same "
    f"UNION ALL SELECT * FROM (SELECT priority, run_at, id {READY} AND priority < %s "
    "ORDER BY priority DESC, run_at, id LIMIT 10) AS lower) AS bounded LIMIT 10")
#: Whether any job is left unfinished, as a drain's end is polled for: two lookups in the partial
#: indexes of ready and running jobs. Not ``count(*) ... WHERE status <> 'succeeded'``: that reads
#: the whole table, 0.37 s a time at a million rows, twice a second beside the drain it measured
#: (a third of a drain's database time on two cores; growth.py, 2026-11-29).
UNFINISHED_LEFT = (f"SELECT EXISTS (SELECT 1 FROM {TABLE} "  # noqa: S608
                   "WHERE status IN ('queued', 'failed')) "
                   f"OR EXISTS (SELECT 1 FROM {TABLE} WHERE status = 'running')")
#: The workers' claim statements in pg_stat_statements (claim_jobs), all and bounded ones.
CLAIMS = "query LIKE 'WITH clock%SKIP LOCKED%'"
BOUNDED = f"{CLAIMS} AND query LIKE '%same_priority%'"
STATS = (f"SELECT n_dead_tup, n_live_tup, pg_relation_size('{TABLE}'), "  # noqa: S608
         f"pg_indexes_size('{TABLE}'), "
         f"(SELECT count(*) FROM {TABLE} WHERE status IN ('queued', 'failed')), "
         f"(SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE {CLAIMS}), "
         f"(SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements WHERE {CLAIMS}), "
         f"(SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE {BOUNDED}), "
         f"(SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements WHERE {BOUNDED}), "
         f"autovacuum_count FROM pg_stat_user_tables WHERE relname = '{TABLE}'")


def connect(dsn):
    import psycopg

    return psycopg.connect(dsn, autocommit=True, application_name=DRIVER)


def percentile(values, fraction):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


class Cluster(BenchCluster):
    """The benchmark cluster with pg_stat_statements, for the workers' own claim times."""

    def start(self):
        import benchmarks.pg as pg

        pg.SERVER_OPTIONS = [*pg.SERVER_OPTIONS,
                             "-c shared_preload_libraries=pg_stat_statements"]
        return super().start()


def measure_capacity(cluster, db, env, logdir, variant, rounds=3) -> float:
    """The median of ``rounds`` drains (``drain_rate``). One 20,000-job drain lasts about a
    second, and on this shared machine one drain a run measured from 15,006 to 21,050 jobs/s
    on one day (2026-11-30), which set the load of the 30 minutes after it."""
    rates = [drain_rate(cluster, db, env, logdir, f"{variant}-capacity-{n}")
             for n in range(rounds)]
    print(f"{variant}: drains of 20,000 jobs: {', '.join(f'{r:,.0f}' for r in rates)} jobs/s",
          flush=True)
    return statistics.median(rates)


def drain_rate(cluster, db, env, logdir, phase, jobs=20_000) -> float:
    """Jobs per second two workers drain from a pre-filled queue, first to last claim."""
    cluster.psql(db, f"INSERT INTO {TABLE} (task_name, payload) "  # noqa: S608
                     f"SELECT '{TASK}', {PAYLOAD} FROM generate_series(1, {jobs}) AS i")
    cluster.psql(db, f"VACUUM ANALYZE {TABLE}")
    proc, log = start_workers(env, WORKER_SETTINGS, logdir, phase)
    try:
        with connect(cluster.dsn(db)) as connection:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                if not connection.execute(UNFINISHED_LEFT).fetchone()[0]:
                    break
                time.sleep(0.2)
            first, last = connection.execute(
                f"SELECT extract(epoch FROM min(claimed_at)), "  # noqa: S608
                f"extract(epoch FROM max(claimed_at)) FROM {TABLE}").fetchone()
    finally:
        stop_workers(proc, log)
    cluster.psql(db, f"DELETE FROM {TABLE}")  # noqa: S608
    cluster.psql(db, f"VACUUM ANALYZE {TABLE}")
    return jobs / max(float(last) - float(first), 0.001)


class Enqueuer(threading.Thread):
    """Enqueues ``rate`` jobs per second, one batch every TICK seconds; keeps (time, first id,
    last id) of each batch."""

    def __init__(self, dsn, rate, started):
        super().__init__(daemon=True)
        self.connection = connect(dsn)
        self.per_batch = max(1, round(rate * TICK))
        self.started = started
        self.batches = []
        self.stopping = threading.Event()

    def run(self):
        due = time.monotonic()
        while not self.stopping.is_set():
            first, last, _ = self.connection.execute(ENQUEUE, (self.per_batch,)).fetchone()
            self.batches.append((time.monotonic() - self.started, first, last))
            due += TICK
            self.stopping.wait(max(0.0, due - time.monotonic()))

    def stop(self):
        self.stopping.set()
        self.join()
        self.connection.close()


class Sampler(threading.Thread):
    """Once a second, the figures of the module docstring; ten claim probes in between."""

    def __init__(self, dsn, enqueuer, started):
        super().__init__(daemon=True)
        self.connection = connect(dsn)
        # One core at most for its reads: its count of ready rows, once a second, ran with two
        # parallel workers once a backlog of a million built up (2026-11-30), taking the cores
        # whose work it measures just when the workers were behind.
        self.connection.execute("SET max_parallel_workers_per_gather = 0")
        self.enqueuer = enqueuer
        self.started = started
        self.samples = []
        self.stopping = threading.Event()

    def pickup(self, now):
        """p50, p95 of claimed_at - enqueued_at (ms) of the jobs enqueued from now-3 to now-2 s."""
        batches = [(a, b) for t, a, b in list(self.enqueuer.batches) if now - 3 <= t < now - 2]
        if not batches:
            return None, None, 0
        rows = self.connection.execute(
            # A job not claimed yet counts with its wait so far (a lower bound of its pickup).
            f"SELECT extract(epoch FROM coalesce(claimed_at, clock_timestamp()) - enqueued_at) "  # noqa: S608, E501
            f"* 1000 FROM {TABLE} WHERE id BETWEEN %s AND %s",
            (batches[0][0], batches[-1][1])).fetchall()
        values = [float(r[0]) for r in rows]
        return percentile(values, 0.5), percentile(values, 0.95), len(values)

    def read(self, statement, params=()):
        """One probe: (milliseconds, the first row it found or None)."""
        t0 = time.perf_counter()
        rows = self.connection.execute(statement, params).fetchall()
        return (time.perf_counter() - t0) * 1000, (rows[0] if rows else None)

    def run(self):
        previous = None
        front = None  # the first ready row the last probe found: the bounded probe's position
        while not self.stopping.is_set():
            second_start = time.monotonic()
            # Once a second the full read (a worker's full claim, FULL_CLAIM_INTERVAL_SECONDS),
            # ten times the bounded one.
            full_ms, first = self.read(CLAIM_PROBE)
            front = first or front
            probes = []
            for _ in range(10):
                t0 = time.perf_counter()
                if front is None:
                    ms, first = self.read(CLAIM_PROBE)
                else:
                    priority, run_at, pk = front
                    ms, first = self.read(BOUNDED_PROBE, (priority, run_at, pk, priority))
                front = first or front
                probes.append(ms)
                self.stopping.wait(max(0.0, 0.09 - (time.perf_counter() - t0)))
            now = time.monotonic() - self.started
            (dead, live, table, indexes, ready, calls, total, bounded_calls, bounded_total,
             autovacuums) = self.connection.execute(STATS).fetchone()
            counters = (int(calls), float(total), int(bounded_calls), float(bounded_total))
            claim_mean = full_mean = bounded_mean = None
            calls = bounded_calls = 0
            if previous:  # this second's claims: the counters' growth since the last sample
                calls, total, bounded_calls, bounded_total = (
                    a - b for a, b in zip(counters, previous, strict=True))
                if calls:
                    claim_mean = total / calls
                if calls > bounded_calls:
                    full_mean = (total - bounded_total) / (calls - bounded_calls)
                if bounded_calls:
                    bounded_mean = bounded_total / bounded_calls
            previous = counters
            p50, p95, picked = self.pickup(now)
            self.samples.append({
                "t": round(now, 2), "claim_p50_ms": percentile(probes, 0.5),
                "claim_p95_ms": percentile(probes, 0.95), "claim_mean_ms_workers": claim_mean,
                "full_read_ms": full_ms, "full_claim_mean_ms_workers": full_mean,
                "bounded_claim_mean_ms_workers": bounded_mean,
                "bounded_claims_per_s": bounded_calls, "claims_per_s": calls,
                "pickup_p50_ms": p50, "pickup_p95_ms": p95, "pickup_jobs": picked,
                "dead_tuples": int(dead), "live_tuples": int(live), "table_bytes": int(table),
                "index_bytes": int(indexes), "ready": int(ready), "autovacuums": int(autovacuums),
            })
            self.stopping.wait(max(0.0, 1.0 - (time.monotonic() - second_start)))

    def stop(self):
        self.stopping.set()
        self.join()
        self.connection.close()


def hold_transaction(dsn, start_at, end_at, started, stopping):
    """From ``start_at`` to ``end_at`` (seconds after ``started``): a REPEATABLE READ snapshot
    with an xid, idle in transaction, as a report or a forgotten session would hold it."""
    stopping.wait(max(0.0, started + start_at - time.monotonic()))
    if stopping.is_set():
        return
    connection = connect(dsn)
    connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    connection.execute("SELECT txid_current()")
    connection.execute(f"SELECT count(*) FROM {TABLE}")  # noqa: S608
    stopping.wait(max(0.0, started + end_at - time.monotonic()))
    connection.execute("COMMIT")
    connection.close()


def summarise(samples, phases) -> dict:
    summary = {}
    for name, (start, end) in phases.items():
        inside = [s for s in samples if start <= s["t"] < end]
        if not inside:
            continue

        def median(key, rows=inside):
            values = [s[key] for s in rows if s[key] is not None]
            return round(statistics.median(values), 2) if values else None

        def high(key, rows=inside):
            values = [s[key] for s in rows if s[key] is not None]
            return round(max(values), 2) if values else None

        summary[name] = {
            "seconds": [round(start), round(end)],
            "claim_p50_ms": median("claim_p50_ms"), "claim_p95_ms": median("claim_p95_ms"),
            "claim_p95_ms_worst_second": high("claim_p95_ms"),
            "claim_mean_ms_workers": median("claim_mean_ms_workers"),
            "full_read_ms": median("full_read_ms"),
            "full_claim_mean_ms_workers": median("full_claim_mean_ms_workers"),
            "bounded_claim_mean_ms_workers": median("bounded_claim_mean_ms_workers"),
            "bounded_share_of_claims": (
                round(sum(s["bounded_claims_per_s"] for s in inside)
                      / max(1, sum(s["claims_per_s"] for s in inside)), 3)),
            "pickup_p50_ms": median("pickup_p50_ms"), "pickup_p95_ms": median("pickup_p95_ms"),
            "pickup_p95_ms_worst_second": high("pickup_p95_ms"),
            "dead_tuples_max": high("dead_tuples"), "ready_max": high("ready"),
            "table_mb_end": round(inside[-1]["table_bytes"] / 2**20, 1),
            "index_mb_end": round(inside[-1]["index_bytes"] / 2**20, 1),
            "table_mb_max": round(high("table_bytes") / 2**20, 1),
            "index_mb_max": round(high("index_bytes") / 2**20, 1),
        }
    return summary


def recovery(samples, quiet, held_end) -> dict:
    """Seconds after the transaction's end until claim and pickup p95 are back within 2x of the
    quiet medians for 10 seconds in a row, and until the table and its indexes are back within
    10% of their size at the end of the quiet phase."""
    def back(test):
        run = 0
        for s in samples:
            if s["t"] < held_end:
                continue
            run = run + 1 if test(s) else 0
            if run >= 10:
                return round(s["t"] - 9 - held_end)
        return None

    return {
        "claim_p95_back_within_2x_s": back(
            lambda s: s["claim_p95_ms"] <= 2 * quiet["claim_p95_ms"]),
        "pickup_p95_back_within_2x_s": back(
            lambda s: s["pickup_p95_ms"] is not None
            and s["pickup_p95_ms"] <= 2 * quiet["pickup_p95_ms"]),
        "table_back_to_quiet_size_s": back(
            lambda s: s["table_bytes"] <= 1.1 * quiet["table_mb_end"] * 2**20),
        "indexes_back_to_quiet_size_s": back(
            lambda s: s["index_bytes"] <= 1.1 * quiet["index_mb_end"] * 2**20),
    }


def run_variant(variant, cluster, args, logdir) -> dict:
    db = f"sustained_{variant}"
    env = django_on_fresh_database(cluster, db, "benchmarks.prune_settings")
    if variant == "untuned":
        from django_sqlqueue.db.postgresql import statements

        cluster.psql(db, statements.reset_job_table_storage_parameters())
    reloptions = cluster.psql(db, f"SELECT reloptions FROM pg_class WHERE relname = '{TABLE}'")  # noqa: S608, E501
    capacity = args.capacity or measure_capacity(cluster, db, env, logdir, variant)
    rate = capacity * args.share
    print(f"{variant}: capacity {capacity:,.0f} jobs/s, enqueueing {rate:,.0f} jobs/s; "
          f"reloptions {reloptions or 'none'}", flush=True)
    length = args.minutes * 60
    held = (length + length / 4, length + 3 * length / 4)
    end = 2 * length + args.after_minutes * 60
    dsn = cluster.dsn(db)
    cluster.psql(db, "SELECT pg_stat_statements_reset()")
    settings = NO_PRUNE_SETTINGS if args.no_prune else WORKER_SETTINGS
    proc, log = start_workers(env, settings, logdir, f"{variant}-load")
    time.sleep(2)  # the workers are up and listening
    started = time.monotonic()
    enqueuer = Enqueuer(dsn, rate, started)
    sampler = Sampler(dsn, enqueuer, started)
    stopping = threading.Event()
    holder = threading.Thread(target=hold_transaction, args=(dsn, *held, started, stopping),
                              daemon=True)
    enqueuer.start()
    sampler.start()
    if args.transaction:
        holder.start()
    try:
        while time.monotonic() - started < end:
            time.sleep(1)
    finally:
        stopping.set()
        if args.transaction:
            holder.join()
        enqueuer.stop()
        sampler.stop()
        stop_workers(proc, log)
    samples = sampler.samples
    phases = {"quiet": (length / 2, length),  # its first half warms the table up
              "before the transaction": (length, held[0]),
              "long transaction": held,
              "first minute after it": (held[1], held[1] + 60),
              "after that": (held[1] + 60, end)}
    if not args.transaction:  # the same load throughout: its minutes in four quarters
        phases = {f"quarter {n + 1}": (n * end / 4, (n + 1) * end / 4) for n in range(4)}
    summary = summarise(samples, phases)
    result = {"variant": variant, "capacity_jobs_per_s": round(capacity),
              "enqueue_jobs_per_s": round(rate), "minutes": args.minutes,
              "after_minutes": args.after_minutes,
              "transaction_held_s": list(held) if args.transaction else None,
              "reloptions": reloptions, "phases": summary, "pruned": not args.no_prune,
              "enqueued": sum(b - a + 1 for _, a, b in enqueuer.batches),
              "ready_at_end": samples[-1]["ready"] if samples else None}
    if "quiet" in summary:
        result["recovery"] = recovery(samples, summary["quiet"], held[1])
    result["samples"] = samples
    return result


def plot(results, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Each panel: (its keys, each with a line label), its axis label, a log scale or not.
    panels = [({"claim_p95_ms": "bounded read p95", "full_read_ms": "full read",
                "claim_mean_ms_workers": "workers' claims, mean"}, "claim (ms)", True),
              ({"pickup_p95_ms": "pickup p95"}, "pickup p95 (ms)", True),
              ({"dead_tuples": "dead tuples"}, "dead tuples", False),
              ({"table_bytes": "table"}, "table size (MB)", False),
              ({"index_bytes": "indexes"}, "index size (MB)", False)]
    figure, axes = plt.subplots(len(panels), 1, figsize=(10, 13), sharex=True)
    for result in results:
        samples = result["samples"]
        times = [s["t"] / 60 for s in samples]
        for axis, (keys, label, log) in zip(axes, panels, strict=True):
            for key, line in keys.items():
                values = [s.get(key) for s in samples]
                if key.endswith("_bytes"):
                    values = [v / 2**20 for v in values]
                name = f"{result['variant']} ({result['enqueue_jobs_per_s']:,} jobs/s)"
                axis.plot(times, [float("nan") if v is None else v for v in values],
                          label=f"{name}: {line}" if len(keys) > 1 else name, linewidth=0.9)
            axis.set_ylabel(label)
            if log:
                axis.set_yscale("log")
    held = results[0]["transaction_held_s"]
    for axis in axes:
        if held:
            axis.axvspan(held[0] / 60, held[1] / 60, color="0.85", zorder=0)
        axis.grid(True, linewidth=0.3)
    axes[0].legend(loc="upper left")
    axes[-1].set_xlabel("minutes (grey: a REPEATABLE READ transaction held open)" if held
                        else "minutes")
    figure.suptitle("Sustained load, two worker processes, finished jobs pruned after 60 s")
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0,
                        help="length of each of the two phases (the issue's: 10)")
    parser.add_argument("--after-minutes", type=float, default=0.0,
                        help="minutes more after the second phase, to watch the recovery "
                             "(7.5 with --minutes 10: 10 minutes after the transaction)")
    parser.add_argument("--variants", default="tuned,untuned")
    parser.add_argument("--capacity", type=float, default=None,
                        help="skip the capacity drain and enqueue at --share of this")
    parser.add_argument("--share", type=float, default=0.5,
                        help="the load: this share of the capacity (jobs per second)")
    parser.add_argument("--no-transaction", dest="transaction", action="store_false",
                        help="hold no transaction: the same load throughout")
    parser.add_argument("--no-prune", action="store_true",
                        help="keep succeeded jobs: the load without the prune's writes")
    parser.add_argument("--plot", type=Path, default=None, help="a PNG to draw")
    parser.add_argument("--output", type=Path, default=None, help="the results as JSON")
    args = parser.parse_args()
    logdir = Path(tempfile.mkdtemp(prefix="sqlqueue-sustained-"))
    cluster = Cluster()
    results = []
    try:
        cluster.start()
        cluster.wait_ready()
        cluster.psql("template1", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        for variant in args.variants.split(","):
            results.append(run_variant(variant, cluster, args, logdir))
            # Every variant at the same load: a share of the capacity measured before the first.
            args.capacity = args.capacity or results[-1]["capacity_jobs_per_s"]
            brief = {k: v for k, v in results[-1].items() if k != "samples"}
            print(json.dumps(brief, indent=1), flush=True)
    finally:
        cluster.destroy()
    output = args.output or logdir / "sustained_load.json"
    output.write_text(json.dumps(results))
    if args.plot:
        plot(results, args.plot)
    print(f"samples: {output}; worker logs: {logdir}")


if __name__ == "__main__":
    main()
