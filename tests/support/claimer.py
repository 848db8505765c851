"""A claiming process for race tests: ``python -m tests.support.claimer WORKER START_LINE``.

Connects, waits for the go at START_LINE (tests/support/start_line.py: every process starts
claiming together), then claims batches of 1 to 10 jobs until the queue stays empty, and prints
the claimed ids as JSON.
"""

import json
import random
import sys

import django

from tests.support.start_line import wait_for_go


def main(worker: str, start_line: str) -> None:
    django.setup()
    from django.db import connection

    from django_sqlqueue.models import Job

    claimed = []
    connection.ensure_connection()  # not part of the race
    wait_for_go(start_line, worker)
    empty_in_a_row = 0
    while empty_in_a_row < 3:
        jobs = Job.objects.claim(None, worker, limit=random.randint(1, 10))
        claimed.extend(job.pk for job in jobs)
        empty_in_a_row = 0 if jobs else empty_in_a_row + 1
    print(json.dumps(claimed))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
