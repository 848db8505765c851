"""django-q2 with its ORM broker (``Q_CLUSTER["orm"]``): one ``manage.py qcluster`` whose worker
pool has as many processes as the other systems' workers; everything else at its defaults
(the broker is polled every 0.2 s)."""

from django.db import connection, transaction

from .. import harness
from . import _django

NAME = "django_q2"


class System(harness.System):
    name = NAME
    label = "django-q2 (ORM)"
    notes = [
        "django-q2: no bulk enqueue API, so 'bulk' is async_task() in a loop inside one "
        "transaction; acknowledged jobs are deleted from the broker table (results go to "
        "another table), so the claim-time scenario does not apply.",
    ]

    def __init__(self, dsn, logdir):
        super().__init__(dsn, logdir)
        _django.setup_django(NAME, dsn)
        from django_q.tasks import async_task

        self.async_task = async_task

    def version(self):
        from importlib.metadata import version

        import django

        return f"{version('django-q2')} (Django {django.get_version()})"

    def setup(self):
        _django.manage(NAME, self.dsn, "migrate")

    def reset(self):
        with connection.cursor() as cursor:
            for table in ("django_q_ormq", "django_q_task"):  # one at a time for MariaDB
                cursor.execute(f"TRUNCATE {table}")

    def unfinished_sql(self):
        return "SELECT count(*) FROM django_q_ormq"

    def enqueue_one(self, i):
        with transaction.atomic():
            self.async_task("benchmarks.benchapp.tasks.noop", i)

    def bulk_enqueue(self, n):
        batch = 10_000
        for start in range(0, n, batch):
            with transaction.atomic():
                for i in range(start, min(n, start + batch)):
                    self.async_task("benchmarks.benchapp.tasks.noop", i)

    def enqueue_pickup(self, key):
        with transaction.atomic():
            self.async_task("benchmarks.benchapp.tasks.pickup", key)

    def worker_specs(self, processes):
        env = {**_django.env(NAME, self.dsn), "BENCH_Q_WORKERS": str(processes)}
        return [(_django.manage_argv("qcluster"), env)]
