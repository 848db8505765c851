"""django-tasks-db: the database backend of Django's Tasks framework (django.tasks, Django 6),
workers are ``manage.py db_worker`` with default options (polls every second, no NOTIFY)."""

import datetime as dt

from django.db import connection, transaction

from .. import dialects, harness
from . import _django

NAME = "django_tasks_db"
TABLE = "django_tasks_database_dbtaskresult"


class System(harness.System):
    name = NAME
    label = "django-tasks-db"
    notes = [
        "django-tasks-db: django.tasks has no bulk enqueue, so 'bulk' is enqueue() in a loop "
        "inside one transaction.",
    ]

    def __init__(self, dsn, logdir):
        super().__init__(dsn, logdir)
        _django.setup_django(NAME, dsn)
        from django_tasks_db.models import DBTaskResult

        from benchmarks.benchapp import tasks

        self.tasks, self.Result = tasks, DBTaskResult

    def version(self):
        from importlib.metadata import version

        import django

        return f"{version('django-tasks-db')} (Django {django.get_version()})"

    def setup(self):
        _django.manage(NAME, self.dsn, "migrate")

    def reset(self):
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {TABLE}")  # noqa: S608

    def unfinished_sql(self):
        return f"SELECT count(*) FROM {TABLE} WHERE status IN ('READY', 'RUNNING')"  # noqa: S608

    def enqueue_one(self, i):
        with transaction.atomic():
            self.tasks.noop.enqueue(i)

    def bulk_enqueue(self, n):
        batch = 10_000
        for start in range(0, n, batch):
            with transaction.atomic():
                for i in range(start, min(n, start + batch)):
                    self.tasks.noop.enqueue(i)

    def prefill(self, n):
        vendor = connection.vendor
        # "No run_after": django-tasks-db stores its far-future sentinel, as the ORM writes it.
        never = connection.ops.adapt_datetimefield_value(
            dt.datetime(9999, 1, 1, tzinfo=dt.timezone.utc))
        with connection.cursor() as cursor:
            cursor.execute(
                f"""INSERT INTO {TABLE} (id, status, enqueued_at, args_kwargs, priority,
                    task_path, worker_ids, queue_name, run_after, backend_name,
                    exception_class_path, traceback)
                SELECT {dialects.new_uuid(vendor)}, 'READY', now(),
                    {dialects.json_args(vendor, "i")}, 0,
                    'benchmarks.benchapp.tasks.noop', '[]', 'default',
                    %s, 'default', '', ''
                FROM {dialects.numbers(vendor, n)}""",  # noqa: S608
                [never],
            )

    def enqueue_pickup(self, key):
        with transaction.atomic():
            self.tasks.pickup.enqueue(key)

    def worker_specs(self, processes):
        argv = _django.manage_argv("db_worker", "--no-reload")
        return [(argv, _django.env(NAME, self.dsn)) for _ in range(processes)]

    # claim time: the worker's own claim (DBTaskResult.objects.ready().get_locked() + claim) --
    def claim_setup(self, ready):
        self.Result.objects.filter(status="RUNNING").delete()
        self.bulk_enqueue(max(0, ready - self.Result.objects.filter(status="READY").count()))
        return True

    def add_finished(self, n):
        with connection.cursor() as cursor:
            cursor.execute(
                f"""INSERT INTO {TABLE} (id, status, enqueued_at, started_at, finished_at,
                    args_kwargs, priority, task_path, worker_ids, queue_name,
                    run_after, backend_name, exception_class_path, traceback, return_value)
                SELECT gen_random_uuid(), 'SUCCESSFUL', now(), now(), now(),
                    '{{"args": [0], "kwargs": {{}}}}', 0, 'benchmarks.benchapp.tasks.noop', '[]',
                    'default', now(), 'default', '', '', 'null'
                FROM generate_series(1, %s)""",  # noqa: S608
                [n],
            )

    def claim_one(self):
        with transaction.atomic():
            result = self.Result.objects.ready().get_locked()
            result.claim("bench")
        return result
