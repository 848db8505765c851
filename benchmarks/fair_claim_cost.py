"""What a claim of a fair queue costs with 10 and with 10,000 keys that have ready jobs, next to
the plain claim of the same jobs, and the plans of the fair claim's reads (docs/fairness.md).

    python benchmarks/fair_claim_cost.py [--database postgresql|sqlite|mariadb]
        [--claims 200] [--limit 10] [--backlog 100000] [--no-plans]

(the project's ``.venv`` has what the three databases need). Starts a throwaway database
(databases.py: PostgreSQL with fsync on, MariaDB at its default durability, or a SQLite file in
WAL mode), migrates django-sqlqueue's tables, and for each number of keys fills the queue (one
multi-row INSERT per 1,000 rows): one key with a backlog of ``--backlog`` ready jobs, and the
other keys with enough ready jobs each that none runs out during the run; then the database's
ANALYZE. Prints the plans of the fair claim's two reads on that fill (finding the keys with
ready jobs, ``ready_keys``; reading three keys' first rows, the big key's among them,
``claimable_ids_by_key``, locked as the claim locks them): PostgreSQL's ``EXPLAIN (ANALYZE,
COSTS OFF, TIMING OFF)``, SQLite's ``EXPLAIN QUERY PLAN``, MariaDB's ``ANALYZE FORMAT=JSON``.
Then times ``--claims`` claims of ``--limit`` jobs (``Job.objects.claim`` with the queue
controls read once, as a worker holds them; the claimed jobs stay running), first with the
queue fair, then plain, each on a fresh fill. Prints p50 and p95 per claim (ms). Writes
nothing into the repository.
"""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.databases import argument_parser, bench_database  # noqa: E402

BIG = "big"
ROWS_PER_INSERT = 1_000


def fill(keys: int, per_key: int, backlog: int) -> None:
    from django.db import connection

    from django_sqlqueue.models import Job, Queue

    Job.objects.all()._raw_delete(Job.objects.db)
    Queue.objects.all()._raw_delete(Queue.objects.db)
    key_of = [BIG] * backlog + [f"key-{i % (keys - 1)}" for i in range((keys - 1) * per_key)]
    with connection.cursor() as cursor:
        for start in range(0, len(key_of), ROWS_PER_INSERT):
            part = key_of[start:start + ROWS_PER_INSERT]
            values = ", ".join(["('noop', 'default', '{}', %s)"] * len(part))
            cursor.execute("INSERT INTO django_sqlqueue_job (task_name, queue, payload, "  # noqa: S608
                           f"concurrency_key) VALUES {values}", part)
        cursor.execute({"postgresql": "VACUUM ANALYZE django_sqlqueue_job",
                        "mysql": "ANALYZE TABLE django_sqlqueue_job"}.get(connection.vendor,
                                                                          "ANALYZE"))
        if connection.vendor == "mysql":
            cursor.fetchall()


def plans() -> list:
    """The plans of the fair claim's reads on the queue as filled: (title, text)."""
    from django.db import connection

    from django_sqlqueue.claim.fair import FAIR_KEYS_PER_CLAIM
    from django_sqlqueue.db import ops
    from django_sqlqueue.models import Job

    driver = ops(connection)
    reads = [
        ("finding the keys (ready_keys)",
         driver.ready_keys(Job, queue="default", unkeyed=True, limit=FAIR_KEYS_PER_CLAIM)),
        (f"reading and locking the first 4 rows of '{BIG}', 3 of 'key-1' and 'key-2' "
         "(claimable_ids_by_key)",
         driver.claimable_ids_by_key(Job, queue="default",
                                     wanted={BIG: 4, "key-1": 3, "key-2": 3})),
    ]
    return [(title, explain(connection, *statement)) for title, statement in reads]


def explain(connection, statement, params) -> str:
    if not isinstance(statement, str):  # MariaDB's KeysInReads: its first read, one after BIG
        from django_sqlqueue.db.mariadb.driver import KEY_READ_ENTRIES

        queue, *_ = params
        return "\n".join([
            "first read:", explain(connection, statement.first, [queue, KEY_READ_ENTRIES]),
            f"a read after '{BIG}':",
            explain(connection, statement.after, [queue, BIG, KEY_READ_ENTRIES])])
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + statement, params)
            return "\n".join(line for line, in cursor.fetchall())
        if connection.vendor == "mysql":
            cursor.execute("ANALYZE FORMAT=JSON " + statement, params)
            return json.dumps(json.loads(cursor.fetchone()[0])["query_block"], indent=1)
        cursor.execute("EXPLAIN QUERY PLAN " + statement, params)
        depth, lines = {0: -1}, []
        for node, parent, _, detail in cursor.fetchall():
            depth[node] = depth.get(parent, -1) + 1
            lines.append("  " * depth[node] + detail)
        return "\n".join(lines)


def time_claims(claims: int, limit: int) -> list:
    from django_sqlqueue.claim.limited import read_controls
    from django_sqlqueue.models import Job, Queue

    controls = read_controls(Queue, "default")  # as a worker holds them: read once a poll
    times = []
    for _ in range(claims):
        started = time.perf_counter()
        claimed = Job.objects.claim(None, "fair-claim-cost", limit=limit, controls=controls)
        times.append((time.perf_counter() - started) * 1000)
        assert len(claimed) == limit, len(claimed)
    return sorted(times)


def main():
    parser = argument_parser(__doc__)
    parser.add_argument("--claims", type=int, default=200)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--no-plans", dest="plans", action="store_false")
    args = parser.parse_args()
    with bench_database(args.database, "benchmarks.django_settings", "fair_claim_cost") as db:
        from django_sqlqueue.queues import control

        print(f"{args.database}: {db.settings()}", flush=True)
        print(f"claims of {args.limit} jobs, ms per claim; one key has {args.backlog:,} ready "
              "jobs", flush=True)
        for keys in (10, 10_000):
            # Enough per key that every key still has ready jobs at the end.
            per_key = args.claims * args.limit // (keys - 1) + 2
            for fair in (True, False):
                fill(keys, per_key, args.backlog)
                if fair and args.plans:
                    for title, plan in plans():
                        print(f"--- {keys:,} keys: {title}\n{plan}", flush=True)
                control.set_fair("default", fair)
                times = time_claims(args.claims, args.limit)
                print(f"  {keys:>6,} keys  {'fair ' if fair else 'plain'}  "
                      f"p50 {statistics.median(times):7.2f}  "
                      f"p95 {times[int(0.95 * len(times)) - 1]:7.2f}", flush=True)


if __name__ == "__main__":
    main()
