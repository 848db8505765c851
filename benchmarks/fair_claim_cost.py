"""What a claim of a fair queue costs with 10 and with 10,000 keys that have ready jobs, next to
the plain claim of the same jobs (docs/fairness.md).

    benchmarks/.venvs/sqlqueue/bin/python benchmarks/fair_claim_cost.py [--claims 200] [--limit 10]

(any virtualenv with django-sqlqueue's ``postgres`` extra: the project's ``.venv`` too). Starts a
throwaway PostgreSQL (fsync on, ``pg.py``), migrates django-sqlqueue's tables, and for each
number of keys fills the queue with ``INSERT ... SELECT generate_series``: one key with a
backlog of ``--backlog`` ready jobs, and the other keys with enough ready jobs each that none
runs out during the run; then ``VACUUM ANALYZE``. Times ``--claims`` claims of ``--limit`` jobs
(``Job.objects.claim`` with the queue controls read once, as a worker holds them; the claimed
jobs stay running), first with the queue fair, then plain, each on a fresh fill. Prints p50 and
p95 per claim (ms). Writes nothing into the repository.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.pg import BenchCluster, django_on_fresh_database  # noqa: E402

DB = "fair_claim_cost"


def fill(cluster, keys: int, per_key: int, backlog: int) -> None:
    cluster.psql(DB, "TRUNCATE django_sqlqueue_job; TRUNCATE django_sqlqueue_queue")
    insert = "INSERT INTO django_sqlqueue_job (task_name, queue, payload, concurrency_key) "
    cluster.psql(DB, f"{insert} SELECT 'noop', 'default', '{{}}', 'big' "  # noqa: S608
                     f"FROM generate_series(1, {backlog})")
    cluster.psql(DB, f"{insert} SELECT 'noop', 'default', '{{}}', 'key-' || (i % {keys - 1}) "  # noqa: S608
                     f"FROM generate_series(1, {(keys - 1) * per_key}) AS i")
    cluster.psql(DB, "VACUUM ANALYZE django_sqlqueue_job")


def time_claims(claims: int, limit: int) -> list:
    from django_sqlqueue.claim.limited import read_controls
    from django_sqlqueue.models import Job

    controls = read_controls(Job, "default")  # as a worker holds them: read once a poll
    times = []
    for _ in range(claims):
        started = time.perf_counter()
        claimed = Job.objects.claim(None, "fair-claim-cost", limit=limit, controls=controls)
        times.append((time.perf_counter() - started) * 1000)
        assert len(claimed) == limit, len(claimed)
    return sorted(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--claims", type=int, default=200)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--backlog", type=int, default=100_000)
    args = parser.parse_args()
    cluster = BenchCluster()
    cluster.start()
    cluster.wait_ready()
    try:
        django_on_fresh_database(cluster, DB, "benchmarks.django_settings")
        from django_sqlqueue.queues import control as queue_control

        print(f"claims of {args.limit} jobs, ms per claim; one key has {args.backlog:,} ready "
              "jobs", flush=True)
        for keys in (10, 10_000):
            # Enough per key that every key still has ready jobs at the end.
            per_key = args.claims * args.limit // (keys - 1) + 2
            for fair in (True, False):
                fill(cluster, keys, per_key, args.backlog)
                queue_control.set_fair("default", fair)
                times = time_claims(args.claims, args.limit)
                print(f"  {keys:>6,} keys  {'fair ' if fair else 'plain'}  "
                      f"p50 {statistics.median(times):7.2f}  "
                      f"p95 {times[int(0.95 * len(times)) - 1]:7.2f}", flush=True)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
