"""``drain()``: run every ready job in this process, as a worker would, until none is left."""

from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job


def drain() -> None:
    while jobs := Job.objects.claim(None, "w", limit=100):
        for job in jobs:
            run_job(job)
