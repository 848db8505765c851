"""The queue dashboard and ``manage.py stats`` on a million jobs: how long they take.

    python benchmarks/dashboard_at_scale.py [--jobs 1000000] [--repeat 10]

(any virtualenv with django-sqlqueue's ``postgres`` extra and Django 5.2+). Starts a throwaway
PostgreSQL with the benchmark's durability (``pg.py``), migrates a fresh database and fills it
with ``INSERT ... SELECT generate_series``: ``--jobs`` jobs over 4 queues and 3 tasks each, of
which 95% succeeded, 2% exhausted and 1% cancelled, spread evenly over the last 7 days by
``finished_at``; 1.5% queued and due (a backlog, up to an hour late), 0.4% scheduled for later,
0.1% failed and waiting for a retry, and 100 running; plus ``--backlog`` more queued and due
(default none: a queue a million jobs behind is another case). Then ``VACUUM ANALYZE``, as
autovacuum would have by then.

Timed, each the median of ``--repeat`` runs after one warm-up (wall clock, in this process,
through Django's test client with a logged-in superuser, so the whole request: session, user,
queries, template):

1. ``Job.objects.stats()``: the full count by queue and status the dashboard used before;
2. the dashboard page and its JSON endpoint *before* the rollup has run (throughput counted from
   the job table, through the ``sqlqueue_job_finished`` index: what a site sees until its
   maintenance leader has rolled up once);
3. the first rollup (``Rollup.run_once()`` until done: a week of history, once per install);
4. the dashboard page, its JSON endpoint, ``snapshot.take()`` alone and ``manage.py stats
   --json`` (in process) after it.

Prints one line per measurement and a markdown table. Writes nothing into the repository.
"""

import argparse
import io
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pg import BenchCluster  # noqa: E402

DB = "dashboard"
QUEUES = ("default", "emails", "billing", "reports")
TASKS = ("shop.tasks.a", "shop.tasks.b", "shop.tasks.c")


def fill(cluster, jobs: int, backlog: int = 0) -> None:
    """The jobs, as the module's docstring says; ``i`` numbers them."""
    queue = "(ARRAY['default','emails','billing','reports'])[1 + i % 4]"
    task = "(ARRAY['shop.tasks.a','shop.tasks.b','shop.tasks.c'])[1 + (i / 4) % 3]"
    payload = "jsonb_build_object('args', jsonb_build_array(i), 'kwargs', '{}'::jsonb)"
    week = 7 * 24 * 3600

    def insert(count, status, when, extra_columns="", extra_values=""):
        cluster.psql(DB, (
            "INSERT INTO django_sqlqueue_job (queue, task_name, payload, status, attempts, "  # noqa: S608
            f"enqueued_at, run_at, finished_at{extra_columns}) "
            f"SELECT {queue}, {task}, {payload}, '{status}', 1, {when}, {when}, "
            f"{'NULL' if status in ('queued', 'failed', 'running') else when}{extra_values} "
            f"FROM generate_series(1, {int(count)}) AS i"))

    spread = f"now() - make_interval(secs => (i::float8 * {week} / {jobs}))"
    insert(jobs * 0.95, "succeeded", spread)
    insert(jobs * 0.02, "exhausted", spread)
    insert(jobs * 0.01, "cancelled", spread)
    insert(jobs * 0.015 + backlog, "queued", "now() - make_interval(secs => (i % 3600))")
    insert(jobs * 0.004, "queued", "now() + make_interval(secs => 60 + i)")
    insert(jobs * 0.001, "failed", "now() + make_interval(secs => 30 + i % 600)")
    insert(100, "running", "now() - interval '5 seconds'",
           ", claimed_by, claim_token, lease_expires_at",
           ", 'bench:1:x', gen_random_uuid(), now() + interval '1 minute'")
    cluster.psql(DB, "VACUUM ANALYZE django_sqlqueue_job")


def timed(function, repeat: int) -> float:
    """Median milliseconds of ``repeat`` calls, after one warm-up."""
    function()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--backlog", type=int, default=0,
                        help="this many more jobs queued and due")
    args = parser.parse_args()
    cluster = BenchCluster()
    try:
        cluster.start()
        cluster.wait_ready()
        dsn = cluster.create_database(DB)
        env = {**os.environ, "BENCH_SYSTEM": "sqlqueue", "BENCH_DSN": dsn,
               "DJANGO_SETTINGS_MODULE": "benchmarks.dashboard_settings",
               "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-m", "django", "migrate"], env=env, cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL)
        os.environ.update({k: env[k] for k in ("BENCH_SYSTEM", "BENCH_DSN",
                                                 "DJANGO_SETTINGS_MODULE")})
        started = time.monotonic()
        fill(cluster, args.jobs, args.backlog)
        rows = cluster.psql(DB, "SELECT count(*) FROM django_sqlqueue_job")
        print(f"filled {int(rows):,} jobs in {time.monotonic() - started:.0f} s", flush=True)
        measure(args)
    finally:
        cluster.destroy()


def measure(args):
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse

    import django_sqlqueue
    from django_sqlqueue.models import Job
    from django_sqlqueue.observability import snapshot
    from django_sqlqueue.worker.maintenance.rollup import Rollup

    print(f"django-sqlqueue from {Path(django_sqlqueue.__file__).parent}")
    User.objects.create_superuser("bench", "bench@example.com", "bench")
    client = Client()
    client.force_login(User.objects.get(username="bench"))
    page = reverse("admin:django_sqlqueue_job_dashboard")
    data = reverse("admin:django_sqlqueue_job_dashboard_data")

    def get(url):
        response = client.get(url)
        assert response.status_code == 200, response.status_code

    results = []

    def report(what, ms):
        results.append((what, ms))
        print(f"{what}: {ms:.0f} ms", flush=True)

    report("Job.objects.stats() (the full count by status, before)",
           timed(lambda: Job.objects.stats(), args.repeat))
    report("dashboard page, no rollup yet", timed(lambda: get(page), args.repeat))
    report("dashboard data endpoint, no rollup yet", timed(lambda: get(data), args.repeat))
    rollup, started, counted = Rollup(alias="default"), time.perf_counter(), 0
    while True:
        result = rollup.run_once()
        counted += result.jobs
        if result.done:
            break
    report(f"first rollup: a week, {counted:,} finished jobs (once per install)",
           (time.perf_counter() - started) * 1000)
    report("dashboard page", timed(lambda: get(page), args.repeat))
    report("dashboard data endpoint (each refresh)", timed(lambda: get(data), args.repeat))
    report("snapshot.take() alone", timed(lambda: snapshot.take(), args.repeat))
    report("manage.py stats --json (in process)",
           timed(lambda: call_command("stats", "--json", stdout=io.StringIO()), args.repeat))
    report("a rollup pass with nothing new (every maintenance interval)",
           timed(lambda: rollup.run_once(), args.repeat))
    backlog = f" + {args.backlog:,} due" if args.backlog else ""
    print(f"\n| {args.jobs:,} jobs{backlog}, PostgreSQL, median of {args.repeat} | ms |\n"
          "|---|---:|")
    for what, ms in results:
        print(f"| {what} | {ms:.0f} |")


if __name__ == "__main__":
    main()
