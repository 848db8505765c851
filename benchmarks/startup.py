"""How long ``runworker`` takes from its start to its first job, and where that time goes.

    benchmarks/.venvs/sqlqueue/bin/python benchmarks/startup.py [--rounds 7] [--processes 1]

Starts a throwaway PostgreSQL (fsync on, ``pg.py``) and migrates django-sqlqueue's tables (the
benchmark project: contenttypes, auth, django-sqlqueue). Then, alternating in each round, so
the machine's other load falls on every line alike:

- ``python -c pass``: the interpreter alone;
- ``django.setup()``: the interpreter, Django and the project's apps (django-sqlqueue's models,
  its admin module is not imported without django.contrib.admin);
- ``manage.py check``: the same and Django's system checks, ours included;
- ``runworker`` to its first job: one job is enqueued (it records when it starts), then
  ``manage.py runworker --burst`` is started; the figure is from the ``exec`` to the job's first
  line, so it holds the command's start, the worker's registration, its first claim and the
  hand-over to a thread.

Prints the median and the lowest of each (seconds), and the CPU seconds (user + sys) of each
process to its exit. The issue's goal (40): runworker ready to claim in under 0.3 s on a warm
machine. Bytecode is compiled first, as on a machine that ran the worker before.
"""

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.pg import BenchCluster, django_on_fresh_database  # noqa: E402
from benchmarks.processes import ROOT  # noqa: E402


def timed_run(argv, env) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one command run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def first_job(env, processes, pickup_file) -> tuple[float, float]:
    """(seconds from exec to the first job's start, the worker's CPU seconds to its exit)."""
    from benchmarks.benchapp import tasks

    key = f"startup-{time.monotonic_ns()}"
    tasks.pickup.enqueue(key)
    argv = [sys.executable, "-m", "django", "runworker", "--burst", "-v", "0"]
    if processes > 1:
        argv += ["--processes", str(processes)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    subprocess.run(argv, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stamps = dict(line.split() for line in Path(pickup_file).read_text().splitlines())
    return (float(stamps[key]) - started,
            (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--processes", type=int, default=1)
    args = parser.parse_args()
    import django

    import django_sqlqueue

    for package in (django_sqlqueue, django):
        compileall.compile_dir(Path(package.__file__).parent, quiet=1, workers=0)
    cluster = BenchCluster()
    cluster.start()
    cluster.wait_ready()
    try:
        env = django_on_fresh_database(cluster, "startup", "benchmarks.django_settings")
        pickup_file = tempfile.NamedTemporaryFile(prefix="startup-", delete=False).name
        env = {**env, "BENCH_PICKUP_FILE": pickup_file}
        os.environ["BENCH_PICKUP_FILE"] = pickup_file
        lines = {
            "python -c pass": lambda: timed_run([sys.executable, "-c", "pass"], env),
            "django.setup()": lambda: timed_run(
                [sys.executable, "-c", "import django; django.setup()"], env),
            "manage.py check": lambda: timed_run(
                [sys.executable, "-m", "django", "check", "-v", "0"], env),
            f"runworker to its first job (-p {args.processes})": lambda: first_job(
                env, args.processes, pickup_file),
        }
        results = {label: [] for label in lines}
        for _ in range(args.rounds):
            for label, run in lines.items():
                results[label].append(run())
        print(f"start-up, {args.rounds} rounds (seconds): median wall, lowest wall, median CPU")
        for label, runs in results.items():
            walls = [wall for wall, _ in runs]
            cpus = [cpu for _, cpu in runs]
            print(f"  {label:42s} {statistics.median(walls):6.3f} {min(walls):6.3f} "
                  f"{statistics.median(cpus):6.3f}", flush=True)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
