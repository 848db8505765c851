"""What the Redis-backed drivers (Celery, RQ) share: the Redis server run.py started, passed in
``BENCH_REDIS_URL``, and the Django set-up their tasks use for the write scenario."""

import os

import redis

from . import _django


class RedisSystemMixin:
    has_autocommit_enqueue = True
    has_write_jobs = True

    def _connect_redis(self):
        self.redis_url = os.environ["BENCH_REDIS_URL"]
        self.redis = redis.Redis.from_url(self.redis_url)

    def setup(self):
        # The business tables (benchapp_order for the write scenario) live in PostgreSQL.
        _django.manage(self.name, self.dsn, "migrate", "--run-syncdb")

    def reset(self):
        self.redis.flushdb()

    def unfinished_sql(self):  # not used: unfinished_count() answers from Redis
        return "SELECT 0"

    def after_fork(self):
        self._connect_redis()
