"""django-sqlqueue, installed editable from this checkout, with its defaults."""

from django.db import connection, transaction

from .. import dialects, harness
from ..workflows import WorkflowSystem
from . import _django

NAME = "sqlqueue"
TABLE = "django_sqlqueue_job"
FINISHED_INSERT = f"""
INSERT INTO {TABLE} (task_name, queue, payload, priority, status, attempts, max_attempts,
    retry_backoff_seconds, retry_min_delay_seconds, retry_max_delay_seconds, retry_jitter,
    enqueued_at, run_at, claimed_at, finished_at, errors, result)
SELECT 'benchmarks.benchapp.tasks.noop', 'default', '{{"args": [], "kwargs": {{}}}}', 0,
    'succeeded', 1, 5, 5, 1, 3600, 0.1, now(), now(), now(), now(), '[]', 'null'
FROM generate_series(1, %s)
"""  # noqa: S608 - constant names only


class System(WorkflowSystem, harness.System):
    name = NAME
    label = "django-sqlqueue"
    notes = []
    has_baseline = True
    has_autocommit_enqueue = True
    has_write_jobs = True

    def __init__(self, dsn, logdir):
        super().__init__(dsn, logdir)
        _django.setup_django(NAME, dsn)
        from benchmarks.benchapp import tasks
        from benchmarks.benchapp.models import Order
        from django_sqlqueue.models import Job

        self.tasks, self.Order, self.Job = tasks, Order, Job
        self.keys = None  # drain_keyed: jobs spread over this many concurrency keys
        self.transactional = False  # drain_transactional: the write jobs are transactional

    def limit_keys(self, keys, key_limit):
        """The drain_keyed scenario: the next prefill spreads the jobs over ``keys`` concurrency
        keys, and the queue allows ``key_limit`` running jobs per key (None: back to none)."""
        from django_sqlqueue.queues import control

        self.keys = keys
        control.set_limits("default", key_concurrency_limit=key_limit)

    def version(self):
        import django

        import django_sqlqueue

        return f"{django_sqlqueue.__version__} (Django {django.get_version()})"

    def setup(self):
        _django.manage(NAME, self.dsn, "migrate", "--run-syncdb")

    def reset(self):
        with connection.cursor() as cursor:
            # MariaDB truncates one table at a time.
            for table in (TABLE, "django_sqlqueue_jobdependency", "benchapp_order"):
                cursor.execute(f"TRUNCATE {table}")

    def unfinished_sql(self):
        return f"SELECT count(*) FROM {TABLE} WHERE status IN ('queued', 'running', 'failed')"  # noqa: S608

    def enqueue_one(self, i):
        with transaction.atomic():
            self.tasks.noop.enqueue(i)

    def set_synchronous_commit(self, on):
        with connection.cursor() as cursor:
            cursor.execute(f"SET synchronous_commit = {'on' if on else 'off'}")

    def enqueue_one_autocommit(self, i):
        self.tasks.noop.enqueue(i)  # Django's autocommit: the INSERT commits on its own

    def prefill_write(self, n):
        if self.transactional:
            self.prefill(n, task="benchmarks.benchapp.tasks.write_transactional")
        else:
            self.prefill(n, task="benchmarks.benchapp.tasks.write")

    def baseline_one(self, i):
        with transaction.atomic():
            self.Order.objects.create(email=f"customer{i}@example.com", total=i)

    def bulk_enqueue(self, n):
        # One task's many calls, as pgqueuer's bulk takes one entrypoint's many payloads.
        batch = 10_000
        for start in range(0, n, batch):
            with transaction.atomic():
                self.tasks.noop.enqueue_many([(i,) for i in range(start, min(n, start + batch))])

    def bulk_enqueue_prepared(self, n):
        """The bulk_prepared scenario: Job.objects.bulk_enqueue of prepared jobs (any tasks,
        options per job)."""
        batch = 10_000
        for start in range(0, n, batch):
            jobs = [self.tasks.noop.prepare(i) for i in range(start, min(n, start + batch))]
            with transaction.atomic():
                self.Job.objects.bulk_enqueue(jobs)

    def prefill(self, n, task="benchmarks.benchapp.tasks.noop"):
        # A plain SQL INSERT of task name and payload is a documented way to enqueue; every
        # other column takes its database default. Much faster than building n Job objects.
        vendor = connection.vendor
        payload, numbers = dialects.json_args(vendor, "i"), dialects.numbers(vendor, n)
        with connection.cursor() as cursor:
            if self.keys:
                cursor.execute(
                    f"INSERT INTO {TABLE} (task_name, payload, concurrency_key) "  # noqa: S608
                    f"SELECT 'benchmarks.benchapp.tasks.noop', {payload}, "
                    f"CONCAT('customer-', MOD(i, %s)) FROM {numbers}",
                    [self.keys],
                )
                return
            if self.transactional:  # as @job(transactional=True) makes them: the default limit
                cursor.execute(
                    f"INSERT INTO {TABLE} (task_name, payload, transactional, "  # noqa: S608
                    f"timeout_seconds) SELECT %s, {payload}, TRUE, 30 FROM {numbers}",
                    [task],
                )
                return
            cursor.execute(
                f"INSERT INTO {TABLE} (task_name, payload) "  # noqa: S608
                f"SELECT %s, {payload} FROM {numbers}",
                [task],
            )

    def enqueue_pickup(self, key):
        with transaction.atomic():
            self.tasks.pickup.enqueue(key)

    # workflows (benchmarks/workflows.py): one enqueue(), one transaction -----------------
    def enqueue_fanin(self, n, tag):
        from django_sqlqueue.workflows import chord, group

        step, done = self.tasks.step, self.tasks.fanin_done
        chord(group(step.s(i) for i in range(n)), done.s(tag=tag)).enqueue()

    def enqueue_chain(self, n, tag):
        from django_sqlqueue.workflows import chain

        step = self.tasks.step
        chain(step.s(0), *(step.s() for _ in range(n - 2)),
              self.tasks.chain_done.s(tag=tag)).enqueue()

    def worker_specs(self, processes, queue=None, transactional_batch=None,
                     transactional_lanes=None):
        argv = _django.manage_argv("runworker", "--verbosity", "0")
        if queue:
            argv += ["--queue", queue]
        if transactional_batch:
            argv += ["--transactional-batch", str(transactional_batch)]
        if transactional_lanes:
            argv += ["--transactional-lanes", str(transactional_lanes)]
        if processes > 1:
            argv += ["--processes", str(processes)]
        return [(argv, _django.env(NAME, self.dsn))]

    # claim time --------------------------------------------------------------------------
    def claim_setup(self, ready):
        with transaction.atomic():
            self.Job.objects.filter(status="running").delete()
            missing = ready - self.Job.objects.filter(status="queued").count()
            if missing > 0:
                self.Job.objects.bulk_enqueue(
                    [self.tasks.noop.prepare(i) for i in range(missing)]
                )
        return True

    def add_finished(self, n):
        with connection.cursor() as cursor:
            cursor.execute(FINISHED_INSERT, [n])

    def claim_one(self):
        (job,) = self.Job.objects.claim(None, "bench", limit=1)
        return job
