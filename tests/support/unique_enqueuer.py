"""An enqueueing process for the unique race:
``python -m tests.support.unique_enqueuer NAME START_LINE KEY PERIOD COUNT``.

Connects, waits for the go at START_LINE (tests/support/start_line.py), then enqueues
``tests.testapp.tasks.add`` COUNT times with ``unique_key=KEY, unique_period=PERIOD``, each in
its own transaction, as fast as it can. Prints as JSON how many of its enqueues inserted a job,
the ids it got back, and the times of its first and last enqueue (to know which periods the race
spanned).
"""

import json
import sys
import time

import django

from tests.support.start_line import wait_for_go


def main(name: str, start_line: str, key: str, period: float, count: int) -> None:
    django.setup()
    from django.db import connection

    from django_sqlqueue.models import Job
    from tests.testapp.tasks import add

    unique = add.using(unique_key=key, unique_period=period)
    connection.ensure_connection()  # not part of the race
    wait_for_go(start_line, name)
    inserted, ids, first = 0, set(), time.time()
    for _ in range(count):
        job = unique.prepare(1, 2)
        got = Job.objects.enqueue_prepared(job)
        inserted += got is job
        ids.add(got.pk)
    print(json.dumps({"inserted": inserted, "ids": sorted(ids), "first": first,
                      "last": time.time()}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
