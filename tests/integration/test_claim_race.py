"""Many processes race to claim the same jobs: no job is ever claimed twice.

On PostgreSQL the claim locks rows with FOR UPDATE SKIP LOCKED; SQLite has no row locks and relies
on its database write lock around the single claiming UPDATE. Both must give the same guarantee.
"""

from collections import Counter

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.support.start_line import race
from tests.testapp.tasks import add

PROCESSES = 8
JOBS = 2000


@pytest.mark.django_db(transaction=True)
def test_racing_processes_never_claim_a_job_twice(db_url, run_python, tmp_path):
    enqueued = Job.objects.bulk_enqueue(add.prepare(i, i) for i in range(JOBS))
    per_process = race(run_python, "tests.support.claimer", tmp_path, processes=PROCESSES,
                       prefix="claimer", env={"DATABASE_URL": db_url()})

    counts = Counter(pk for ids in per_process for pk in ids)
    assert sorted(counts) == sorted(job.pk for job in enqueued)  # every job claimed...
    assert max(counts.values()) == 1  # ...exactly once
    assert sum(1 for ids in per_process if ids) > 1, "the processes did not actually race"
    rows = Job.objects.values_list("status", "attempts").distinct()
    assert list(rows) == [(JobStatus.RUNNING, 1)]
    owners = dict(Job.objects.values_list("pk", "claimed_by"))
    for n, ids in enumerate(per_process):
        assert all(owners[pk] == f"claimer-{n}" for pk in ids)
