"""procrastinate through its Django integration (``procrastinate.contrib.django``): tasks defer
through Django's connection, so an enqueue joins the request's transaction; workers are
``manage.py procrastinate worker`` with default options (one job at a time, LISTEN/NOTIFY)."""

from django.db import connection, transaction

from .. import harness
from . import _django

NAME = "procrastinate"


class System(harness.System):
    name = NAME
    label = "procrastinate"
    notes = []
    has_autocommit_enqueue = True
    has_write_jobs = True

    def __init__(self, dsn, logdir):
        super().__init__(dsn, logdir)
        _django.setup_django(NAME, dsn)
        from benchmarks.benchapp import tasks

        self.tasks = tasks
        self._worker_id = None

    def version(self):
        from importlib.metadata import version

        import django

        return f"{version('procrastinate')} (Django {django.get_version()})"

    def setup(self):
        _django.manage(NAME, self.dsn, "migrate", "--run-syncdb")  # + benchapp_order

    def reset(self):
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE procrastinate_jobs, procrastinate_events, "
                           "procrastinate_periodic_defers, procrastinate_workers CASCADE")
        self._worker_id = None

    def unfinished_sql(self):
        return "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"

    def enqueue_one(self, i):
        with transaction.atomic():
            self.tasks.noop.defer(i=i)

    def enqueue_one_autocommit(self, i):
        self.tasks.noop.defer(i=i)

    def bulk_enqueue(self, n, task=None):
        task = task or self.tasks.noop
        batch = 10_000
        for start in range(0, n, batch):
            with transaction.atomic():
                kwargs = ({"i": i} for i in range(start, min(n, start + batch)))
                task.batch_defer(*kwargs)

    def prefill_write(self, n):
        self.bulk_enqueue(n, self.tasks.write)

    def enqueue_pickup(self, key):
        with transaction.atomic():
            self.tasks.pickup.defer(key=key)

    def worker_specs(self, processes):
        argv = _django.manage_argv("procrastinate", "worker")
        return [(argv, _django.env(NAME, self.dsn)) for _ in range(processes)]

    # claim time: procrastinate's own claim query (sql.queries["fetch_job"]) ------------------
    def claim_setup(self, ready):
        from procrastinate import sql

        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM procrastinate_jobs WHERE status = 'doing'")
            if self._worker_id is None:
                cursor.execute(sql.queries["register_worker"])
                self._worker_id = cursor.fetchone()[0]
        self.bulk_enqueue(max(0, ready - self._count("todo")))
        return True

    def _count(self, status):
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = %s", [status])
            return cursor.fetchone()[0]

    def add_finished(self, n):
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO procrastinate_jobs (queue_name, task_name, status, args, attempts) "
                "SELECT 'default', 'noop', 'succeeded', '{}', 1 FROM generate_series(1, %s)", [n]
            )

    def claim_one(self):
        from procrastinate import sql

        with connection.cursor() as cursor:
            cursor.execute(sql.queries["fetch_job"], {"queues": None, "worker_id": self._worker_id})
            return cursor.fetchone()
