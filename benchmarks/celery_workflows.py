"""The Celery application of the workflow scenarios (``benchmarks/workflows.py``): the broker of
``celery_app.py`` (the run's Redis, ``BENCH_REDIS_URL``) and a Redis result backend on the same
Redis database, which Celery's chords need (a chord's callback is released by a counter in the
result backend) and which passes a chain's results. Its own app, so that the other scenarios
keep Celery's default of no result backend; no Django: the tasks touch no database.
"""

import os

from celery import Celery

from benchmarks.processes import record_pickup

app = Celery("bench_workflows", broker=os.environ.get("BENCH_REDIS_URL"),
             backend=os.environ.get("BENCH_REDIS_URL"))


@app.task
def step(previous):
    return previous + 1


@app.task
def chain_done(previous, tag=""):
    record_pickup(f"{tag}:{previous}")


@app.task
def fanin_done(results, tag=""):
    record_pickup(f"{tag}:{sum(result is not None for result in results)}")
