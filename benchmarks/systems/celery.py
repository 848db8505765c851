"""Celery 5 with a Redis broker, set up as Celery's Django guide says (`benchmarks/celery_app.py`),
every setting at Celery's default but the broker URL: no result backend, prefetch multiplier 4,
early acknowledgement, and ``celery worker``'s default pool, prefork, with one child process per
core (2 here, our worker process count). ``systems/celery_solo.py`` runs two ``--pool solo``
workers instead.

Enqueue: ``delay()`` (autocommit: Celery has no transaction; the message is published at once)
and, inside ``transaction.atomic()``, ``delay_on_commit()``, Celery's documented way to publish
only once the request's transaction commits.
"""

import sys

from celery import group
from django.db import transaction

from .. import harness
from ..workflows import WorkflowSystem
from . import _django, _redis

NAME = "celery"


class System(_redis.RedisSystemMixin, WorkflowSystem, harness.System):
    name = NAME
    label = "Celery + Redis"
    notes = [
        "Celery + Redis: one `celery worker` with its defaults (prefork pool, concurrency = 2 "
        "cores, prefetch multiplier 4, early ack, no result backend); enqueue in a transaction "
        "is `delay_on_commit()`, autocommit is `delay()`; no bulk API: bulk is a `group` of "
        "signatures sent with one `apply_async()`.",
    ]

    def __init__(self, dsn, logdir):
        super().__init__(dsn, logdir)
        _django.setup_django(self.name, dsn)
        self._connect_redis()
        from benchmarks.benchapp import tasks

        self.tasks = tasks

    def version(self):
        import celery
        import django
        import redis

        info = self.redis.info("server")
        return (f"{celery.__version__} (redis-py {redis.__version__}, Redis "
                f"{info['redis_version']}, Django {django.get_version()})")

    def unfinished_count(self):
        # Messages not yet taken (the queue's list) and taken but not yet acknowledged (the
        # "unacked" hash: with early ack, a message leaves it as its task starts).
        return self.redis.llen("celery") + self.redis.hlen("unacked")

    def enqueue_one(self, i):
        with transaction.atomic():
            self.tasks.noop.delay_on_commit(i)

    def enqueue_one_autocommit(self, i):
        self.tasks.noop.delay(i)

    def bulk_enqueue(self, n, task=None):
        task = task or self.tasks.noop
        batch = 10_000
        for start in range(0, n, batch):
            group(task.s(i) for i in range(start, min(n, start + batch))).apply_async()

    def prefill_write(self, n):
        self.bulk_enqueue(n, self.tasks.write)

    def enqueue_pickup(self, key):
        with transaction.atomic():
            self.tasks.pickup.delay_on_commit(key)

    # workflows (benchmarks/workflows.py): Celery's chord and chain, on the app of
    # benchmarks/celery_workflows.py (the same broker, and a Redis result backend) -------------
    def enqueue_fanin(self, n, tag):
        from celery import chord

        from benchmarks import celery_workflows as flows

        chord(group(flows.step.s(i) for i in range(n)), flows.fanin_done.s(tag=tag)).apply_async()

    def enqueue_chain(self, n, tag):
        from celery import chain

        from benchmarks import celery_workflows as flows

        chain(flows.step.s(0), *(flows.step.s() for _ in range(n - 2)),
              flows.chain_done.s(tag=tag)).apply_async()

    workflow_note = ("Celery's workflows run on the app of benchmarks/celery_workflows.py: the "
                     "same broker and worker command, and a Redis result backend (on the same "
                     "Redis), which chords need; its callback is released by a counter there.")

    def workflow_worker_specs(self, processes):
        # The same workers (pool, concurrency), started on the workflows' app.
        return [([{"benchmarks.celery_app": "benchmarks.celery_workflows"}.get(a, a) for a in argv],
                 env) for argv, env in self.worker_specs(processes)]

    def worker_specs(self, processes):
        argv = [sys.executable, "-m", "celery", "-A", "benchmarks.celery_app", "worker",
                "--loglevel", "WARNING", "--concurrency", str(processes)]
        return [(argv, _django.env(self.name, self.dsn))]
