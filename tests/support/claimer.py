"""A claiming process for race tests: ``python -m tests.support.claimer WORKER START_AT``.

Waits until the wall-clock time START_AT (so that every process starts claiming together), then
claims batches of 1 to 10 jobs until the queue stays empty, and prints the claimed ids as JSON.
"""

import json
import random
import sys
import time

import django


def main(worker: str, start_at: float) -> None:
    django.setup()
    from django_sqlqueue.models import Job

    claimed = []
    time.sleep(max(0.0, start_at - time.time()))
    empty_in_a_row = 0
    while empty_in_a_row < 3:
        jobs = Job.objects.claim(None, worker, limit=random.randint(1, 10))
        claimed.extend(job.pk for job in jobs)
        empty_in_a_row = 0 if jobs else empty_in_a_row + 1
    print(json.dumps(claimed))


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
