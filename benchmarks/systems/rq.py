"""RQ through django-rq, every setting at its default but the queue's Redis URL (``RQ_QUEUES``):
workers are ``manage.py rqworker default``, once per worker process, with RQ's default worker
class, which forks a "work horse" process for every job; results kept 500 s.

Enqueue: ``queue.enqueue()`` (autocommit: published at once) and, inside
``transaction.atomic()``, the same call in ``transaction.on_commit()``, so the job is published only
once the request's transaction commits. Bulk: ``Queue.enqueue_many()`` (one Redis pipeline).
"""

from django.db import transaction

from .. import harness
from . import _django, _redis

NAME = "rq"


class System(_redis.RedisSystemMixin, harness.System):
    name = NAME
    label = "RQ (django-rq)"
    notes = [
        "RQ (django-rq): two `manage.py rqworker --verbosity 0 default` processes with RQ's "
        "default worker class (a forked work horse per job); enqueue in a transaction is "
        "`queue.enqueue()` in `transaction.on_commit()`, autocommit is `queue.enqueue()`.",
    ]

    def __init__(self, dsn, logdir):
        super().__init__(dsn, logdir)
        _django.setup_django(self.name, dsn)
        self._connect_redis()
        from benchmarks.benchapp import tasks

        self.tasks = tasks
        self._queue = None

    @property
    def queue(self):
        if self._queue is None:
            import django_rq

            self._queue = django_rq.get_queue("default")
        return self._queue

    def after_fork(self):
        super().after_fork()
        self._queue = None

    def version(self):
        from importlib.metadata import version

        import django

        info = self.redis.info("server")
        return (f"rq {version('rq')}, django-rq {version('django-rq')} (Redis "
                f"{info['redis_version']}, Django {django.get_version()})")

    def unfinished_count(self):
        # Waiting, moved to the intermediate queue by a worker's dequeue, or running.
        from rq.registry import StartedJobRegistry

        queue = self.queue
        return (queue.count + self.redis.llen(queue.intermediate_queue_key)
                + StartedJobRegistry(queue=queue).count)

    def enqueue_one(self, i):
        with transaction.atomic():
            transaction.on_commit(lambda: self.queue.enqueue(self.tasks.noop, i))

    def enqueue_one_autocommit(self, i):
        self.queue.enqueue(self.tasks.noop, i)

    def bulk_enqueue(self, n, func=None):
        from rq import Queue

        func = func or self.tasks.noop
        batch = 10_000
        for start in range(0, n, batch):
            self.queue.enqueue_many(
                [Queue.prepare_data(func, (i,)) for i in range(start, min(n, start + batch))]
            )

    def prefill_write(self, n):
        self.bulk_enqueue(n, self.tasks.write)

    def enqueue_pickup(self, key):
        with transaction.atomic():
            transaction.on_commit(lambda: self.queue.enqueue(self.tasks.pickup, key))

    def worker_specs(self, processes):
        argv = _django.manage_argv("rqworker", "--verbosity", "0", "default")
        return [(argv, _django.env(self.name, self.dsn)) for _ in range(processes)]
