"""Celery + Redis as in ``systems/celery.py``, but with ``celery worker --pool solo`` started once
per worker process (two processes, each running one task at a time in its own main thread, no
pool child to hand tasks to): the fastest way to run short tasks in Celery, and the set-up the
issue's first measurement used."""

import sys

from . import _django
from .celery import System as CelerySystem

NAME = "celery_solo"


class System(CelerySystem):
    name = NAME
    label = "Celery + Redis (solo)"
    notes = [
        "Celery + Redis (solo): two `celery worker --pool solo` processes, every other setting "
        "as for Celery + Redis.",
    ]

    def worker_specs(self, processes):
        return [
            ([sys.executable, "-m", "celery", "-A", "benchmarks.celery_app", "worker",
              "--loglevel", "WARNING", "--pool", "solo", "--hostname", f"solo{index}@%h"],
             _django.env(self.name, self.dsn))
            for index in range(processes)
        ]
