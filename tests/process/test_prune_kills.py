"""The cleaner SIGKILLed in the middle of a prune leaves nothing half-deleted: each batch deletes
its jobs, their durable steps and the workflow edges of the jobs deleted as children together or
not at all (one statement on PostgreSQL, one transaction elsewhere), and the next worker's
cleaner finishes the prune. Jobs still inside their retention keep their rows.

Nothing is timed: the kill comes once the first batches are gone, and whether it lands inside a
batch or between two, the same rows must be left. The batches are small (25 rows) and the
cleaner pauses after each (a backlog: seven times the batch's own time), so the prune of 2,000
jobs is still under way when the test sees it start.
"""

import datetime as dt

import pytest
from django.utils import timezone

from django_sqlqueue.models import Job, JobDependency, JobStep
from django_sqlqueue.statuses import JobStatus
from tests.factories import JobFactory
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SETTINGS = {"LEASE_SECONDS": 10, "MAINTENANCE_INTERVAL_SECONDS": 0.5,
            "POLL_INTERVAL_SECONDS": 0.2, "KEEP_SUCCEEDED_SECONDS": 3600,
            "PRUNE_INTERVAL_SECONDS": 0.5, "MAINTENANCE_BATCH_SIZE": 25}
OLD = 2_000  # succeeded two days ago: past the retention
KEPT = 10  # succeeded just now: inside it


def test_a_cleaner_killed_during_a_prune_leaves_no_step_or_edge_behind(start_worker):
    now = timezone.now()
    old = Job.objects.bulk_create(
        JobFactory.build(status=JobStatus.SUCCEEDED, finished_at=now - dt.timedelta(days=2))
        for _ in range(OLD))
    kept = Job.objects.bulk_create(
        JobFactory.build(status=JobStatus.SUCCEEDED, finished_at=now) for _ in range(KEPT))
    JobStep.objects.bulk_create(JobStep(job=job, name="charge") for job in old + kept)
    # Edges whose child is pruned (they must go with it) and whose child is kept (they stay).
    JobDependency.objects.bulk_create(
        [JobDependency(child=job, parent=kept[0]) for job in old]
        + [JobDependency(child=job, parent=old[0]) for job in kept[1:]])
    old_ids = [job.pk for job in old]

    def old_left() -> int:
        return Job.objects.filter(pk__in=old_ids).count()

    doomed = start_worker("--no-scheduler", settings=SETTINGS)
    wait_until(lambda: old_left() < OLD, what="the prune to start", worker=doomed, timeout=120)
    doomed.stop()  # SIGKILL
    rescuer = start_worker("--no-scheduler", settings=SETTINGS)
    wait_until(lambda: old_left() == 0, what="the next cleaner to finish the prune",
               worker=rescuer, timeout=240)

    kept_ids = sorted(job.pk for job in kept)
    assert sorted(Job.objects.values_list("pk", flat=True)) == kept_ids
    # Every step and edge of a pruned job went with it, in whichever batch the kill cut.
    assert sorted(JobStep.objects.values_list("job_id", flat=True)) == kept_ids
    assert sorted(JobDependency.objects.values_list("child_id", flat=True)) == kept_ids[1:]
