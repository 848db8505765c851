"""dj-queue: a backend of Django's Tasks framework (django.tasks, Django 6) after Rails' Solid
Queue: a job row plus one row per live state (ready, claimed, ...), each state change a delete
from one table and an insert into the next.

Jobs are enqueued with Django's own ``task.enqueue()``, bulk with the backend's ``enqueue_all()``.
Workers are one ``manage.py dj_queue`` supervisor, as its README starts them, whose one worker
entry forks as many processes as the other systems' workers (``{"processes": W}`` in
``TASKS["default"]["OPTIONS"]["workers"]``, the only option set, so that W means the same
processes for every system: see django_settings.py). The supervisor also forks a dispatcher and
a scheduler (the finished-job clean-up), as by default. Everything else is at dj-queue's defaults:
3 threads per worker process, polling every 0.1 s, LISTEN/NOTIFY wake-ups on PostgreSQL, finished
jobs kept. ``CONN_MAX_AGE`` is 60, as its README recommends for workers: dj-queue closes a
thread's connection around each poll and each job the way Django does around a request
(``close_old_connections``), so with Django's default of 0 each job opened a new database
connection.
"""

from django.db import connection, transaction

from .. import harness
from . import _django

NAME = "dj_queue"
JOBS = "dj_queue_jobs"
#: The tables of a job's live states: a job not finished yet (nor failed) has a row in one.
LIVE = ("dj_queue_ready_executions", "dj_queue_claimed_executions",
        "dj_queue_scheduled_executions", "dj_queue_blocked_executions")
#: Every table with job rows, children first.
JOB_TABLES = (*LIVE, "dj_queue_failed_executions", "dj_queue_recurring_executions", JOBS)


class System(harness.System):
    name = NAME
    label = "dj-queue"
    notes = [
        "dj-queue: workers are one `manage.py dj_queue` supervisor forking W worker processes of "
        "3 threads each (its default), so up to 3W jobs run at once, plus its dispatcher and "
        "scheduler processes; CONN_MAX_AGE = 60, as its README recommends for workers (it "
        "closes its connections around each poll and job). 'bulk' is the backend's "
        "enqueue_all() (a bulk INSERT into its jobs and ready tables), 10,000 jobs a call.",
    ]

    def __init__(self, dsn, logdir):
        super().__init__(dsn, logdir)
        _django.setup_django(NAME, dsn)
        from dj_queue.api import claim_ready_jobs
        from dj_queue.models import Job, ReadyExecution

        from benchmarks.benchapp import tasks

        self.tasks = tasks
        self.backend = tasks.noop.get_backend()
        self.claim_ready_jobs = claim_ready_jobs
        self.Job, self.ReadyExecution = Job, ReadyExecution

    def version(self):
        from importlib.metadata import version

        import django

        return f"{version('dj-queue')} (Django {django.get_version()})"

    def setup(self):
        _django.manage(NAME, self.dsn, "migrate")

    def reset(self):
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"TRUNCATE {', '.join(JOB_TABLES)}")
                return
            # MariaDB truncates no table that a foreign key points at, even an empty one.
            cursor.execute("SET FOREIGN_KEY_CHECKS = 0")
            try:
                for table in JOB_TABLES:
                    cursor.execute(f"TRUNCATE {table}")
            finally:
                cursor.execute("SET FOREIGN_KEY_CHECKS = 1")

    def unfinished_sql(self):
        # A state change moves the job from one table to the next in one transaction, so the sum
        # never misses a job; failed jobs (dj_queue_failed_executions) count as done.
        counts = (f"(SELECT count(*) FROM {table})" for table in LIVE)  # noqa: S608
        return "SELECT " + " + ".join(counts)

    def enqueue_one(self, i):
        with transaction.atomic():
            self.tasks.noop.enqueue(i)

    def bulk_enqueue(self, n):
        noop, batch = self.tasks.noop, 10_000
        for start in range(0, n, batch):
            self.backend.enqueue_all([(noop, [i], {}) for i in range(start, min(n, start + batch))])

    def enqueue_pickup(self, key):
        with transaction.atomic():
            self.tasks.pickup.enqueue(key)

    def worker_specs(self, processes):
        env = {**_django.env(NAME, self.dsn), "BENCH_DJQ_PROCESSES": str(processes)}
        return [(_django.manage_argv("dj_queue"), env)]

    # claim time: the worker's own claim (dj_queue.api.claim_ready_jobs, one job) ---------------
    def claim_setup(self, ready):
        # The jobs claimed last time: gone (with their claimed rows), as if they had run.
        self.Job.objects.filter(claimed_execution__isnull=False).delete()
        self.bulk_enqueue(max(0, ready - self.ReadyExecution.objects.count()))
        return True

    def add_finished(self, n):
        # Successful jobs as the worker leaves them (no state row, finished_at and return_value
        # set; preserve_finished_jobs is on by default). PostgreSQL only, as the scenario.
        with connection.cursor() as cursor:
            cursor.execute(
                f"""INSERT INTO {JOBS} (id, task_path, queue_name, priority, payload,
                    backend_alias, finished_at, return_value, created_at, updated_at)
                SELECT gen_random_uuid(), 'benchmarks.benchapp.tasks.noop', 'default', 0,
                    '{{"args": [0], "kwargs": {{}}}}', 'default', now(), 'null', now(), now()
                FROM generate_series(1, %s)""",  # noqa: S608
                [n],
            )

    def claim_one(self):
        return self.claim_ready_jobs(limit=1)
