"""The floor of pickup latency for any queue that claims its jobs in PostgreSQL: how soon an
idle worker can start a job after the enqueue committed, with nothing of a job queue's own work
in the way (no ORM, no threads, no job rows beyond an id).

    benchmarks/.venvs/sqlqueue/bin/python benchmarks/pickup_floor.py [--rounds 3] [--jobs 100]

Starts a throwaway PostgreSQL (fsync on, ``pg.py``) with a one-column job table. Two worker
processes (as in run.py's pickup scenario) each LISTEN, and on a notification claim the next
job with one prepared ``UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING``
in autocommit, then write down the time: that is where a job would start. The enqueuer commits
an INSERT that notifies in the same statement, 5 a second (Poisson arrivals), and writes down
the time its commit returned. Four ways to claim, alternating in each round:

- durable, own connection: the claim commits with its WAL flush, on a connection of its own
  (as django-sqlqueue, Oban and pgqueuer do);
- durable, listening connection: the same claim sent on the connection that received the
  notification (its backend is awake already);
- asynchronous, own connection: ``synchronous_commit = off`` for the claim, so its commit does
  not wait for the flush (a crash can lose a claim that a worker acted on);
- asynchronous, listening connection.

Prints p50 and p95 per way (ms), against which run.py's pickup figures can be read: what is
above the floor is the queue's own work. Results in docs/performance.md.
"""

import argparse
import multiprocessing
import random
import select
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.pg import BenchCluster  # noqa: E402
from benchmarks.processes import percentile  # noqa: E402

CLAIM = ("UPDATE floor_job SET claimed = true WHERE id = (SELECT id FROM floor_job "
         "WHERE NOT claimed ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id")
ENQUEUE = ("WITH job AS (INSERT INTO floor_job DEFAULT VALUES RETURNING id) "
           "SELECT id, pg_notify('floor', '') FROM job")
WAYS = {
    "durable, own connection": {"same": False, "durable": True},
    "durable, listening connection": {"same": True, "durable": True},
    "asynchronous, own connection": {"same": False, "durable": False},
    "asynchronous, listening connection": {"same": True, "durable": False},
}


def worker(dsn: str, started_file: str, same: bool, durable: bool, ready, stop) -> None:
    import psycopg

    listening = psycopg.connect(dsn, autocommit=True)
    listening.execute("LISTEN floor")
    claiming = listening if same else psycopg.connect(dsn, autocommit=True)
    if not durable:
        claiming.execute("SET synchronous_commit = off")
    claiming.execute(CLAIM, prepare=True)  # prepared before the first job, as a warm worker
    socket = listening.pgconn.socket
    ready.release()
    with open(started_file, "a") as out:
        while not stop.is_set():
            if not select.select([socket], [], [], 0.2)[0]:
                continue
            for _ in listening.notifies(timeout=0, stop_after=0):
                pass
            while rows := claiming.execute(CLAIM, prepare=True).fetchall():
                out.write(f"{rows[0][0]} {time.time():.6f}\n")
                out.flush()


def one_way(dsn: str, jobs: int, rate: float, same: bool, durable: bool) -> list:
    """Pickup latencies (ms) of ``jobs`` jobs, two workers claiming the given way."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as enqueuer:
        enqueuer.execute("DROP TABLE IF EXISTS floor_job")
        enqueuer.execute("CREATE TABLE floor_job (id bigserial PRIMARY KEY, "
                         "claimed boolean NOT NULL DEFAULT false)")
        started_file = tempfile.NamedTemporaryFile(prefix="floor-", delete=False).name
        ready, stop = multiprocessing.Semaphore(0), multiprocessing.Event()
        workers = [multiprocessing.Process(target=worker, args=(dsn, started_file, same, durable,
                                                                ready, stop))
                   for _ in range(2)]
        for process in workers:
            process.start()
        for _ in workers:
            ready.acquire()
        time.sleep(1.0)  # idle, as run.py's pickup workers are before each job
        committed = {}
        for _ in range(jobs):
            time.sleep(random.expovariate(rate))
            job_id = enqueuer.execute(ENQUEUE).fetchone()[0]
            committed[job_id] = time.time()
        time.sleep(0.5)
        stop.set()
        for process in workers:
            process.join()
    started = {}
    for line in Path(started_file).read_text().splitlines():
        job_id, at = line.split()
        started.setdefault(int(job_id), float(at))
    Path(started_file).unlink()
    missing = set(committed) - set(started)
    if missing:
        raise RuntimeError(f"{len(missing)} job(s) never started")
    return sorted((started[job_id] - at) * 1000 for job_id, at in committed.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--rate", type=float, default=5.0, help="jobs a second (default 5)")
    args = parser.parse_args()
    cluster = BenchCluster()
    cluster.start()
    cluster.wait_ready()
    try:
        dsn = cluster.create_database("pickup_floor")
        print(f"pickup floor: 2 workers, {args.jobs} jobs at {args.rate:g}/s, "
              f"{args.rounds} rounds (ms)", flush=True)
        for round_number in range(1, args.rounds + 1):
            for label, way in WAYS.items():
                latencies = one_way(dsn, args.jobs, args.rate, **way)
                print(f"  round {round_number}  {label:36s} p50 {percentile(latencies, 50):5.2f}"
                      f"  p95 {percentile(latencies, 95):5.2f}", flush=True)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
