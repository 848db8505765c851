"""Claims as the tests make them, through ``Job.objects.claim`` as a worker does: of many jobs
(``claim``), of the one ready job (``claim_one``), or of a job made ready again first, as its
retry would be once due (``claim_now``)."""

from django.db.models import F

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus


def claim(queues=None, limit=50, *, worker="w", **options) -> list:
    """Up to ``limit`` ready jobs of ``queues`` (None: of every queue), claimed for ``worker``;
    ``options`` as ``Job.objects.claim`` takes them (``now``, ``lease``, ``controls``...)."""
    return Job.objects.claim(queues, worker, limit=limit, **options)


def claim_one(worker="w1", *, job=None, **options) -> Job:
    """The one job a claim for ``worker`` takes, checked to be one (``job``'s, if given): for a
    test that left a single job ready. ``options`` as for ``claim``."""
    claimed = claim(limit=1, worker=worker, **options)
    assert len(claimed) == 1, f"claimed {claimed}, not one job"
    assert job is None or claimed[0].pk == job.pk, f"claimed {claimed[0]}, not {job}"
    return claimed[0]


def claim_now(pk, worker="w1") -> Job:
    """Make job ``pk`` ready (queued, due since it was enqueued) and claim it: its first run, or
    its next one without waiting out the retry's backoff."""
    Job.objects.filter(pk=pk).update(status=JobStatus.QUEUED, run_at=F("enqueued_at"))
    return claim_one(worker, job=Job(pk=pk))
