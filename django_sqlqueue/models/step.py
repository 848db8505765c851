"""JobStep: a durable step's recorded result (docs/steps.md). The step API is ``run/steps.py``;
this module holds the table and its three queries, which it reaches through the job
(``Job.recorded_steps``, ``Job.recorded_step``, ``Job.record_step``)."""

from django.db import models


class JobStep(models.Model):
    """One completed step of one job: its name, its JSON result, when and in which attempt it ran.

    Unique on (job, name): the first run that records a step wins, and a second recording (a
    worker whose lease was lost, racing the run that took the job over) fails with an
    IntegrityError, which rolls back that run's atomic step (``run/steps.py``).

    No foreign-key constraint in the database: finished jobs are deleted in batches by plain
    statements (the cleaner, ``purgejobs``), which delete their steps in the same transaction
    (``JobQuerySet.delete_batch``); an ORM delete of a job (the admin) cascades to its steps.
    The unique constraint's index, led by the job, serves every read, so the foreign key has
    no index of its own."""

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey("Job", on_delete=models.CASCADE, db_constraint=False,
                            db_index=False, related_name="steps")
    name = models.CharField(max_length=200)
    result = models.JSONField(null=True, blank=True)
    attempt = models.PositiveIntegerField(db_default=0)  # the job's attempts when it completed
    # By the worker's clock (no query to read the database's): when the step's function was
    # called and when it returned.
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "name"], name="sqlqueue_step_once"),
        ]

    def __str__(self):
        return f"step {self.name!r} of job {self.job_id}"


def recorded_steps(job) -> dict:
    """The results of ``job``'s recorded steps by name, in one query."""
    return dict(JobStep.objects.using(job._state.db).filter(job_id=job.pk)
                .values_list("name", "result"))


def recorded_step(job, name: str):
    """The recorded result of ``job``'s step ``name`` (it must exist)."""
    return JobStep.objects.using(job._state.db).filter(
        job_id=job.pk, name=name).values_list("result", flat=True).get()


def record_step(job, name: str, result, *, started_at, finished_at, duration_seconds) -> None:
    """Insert the step's row; an IntegrityError says that another run recorded it first."""
    JobStep.objects.using(job._state.db).create(
        job_id=job.pk, name=name, result=result, attempt=job.attempts, started_at=started_at,
        finished_at=finished_at, duration_seconds=duration_seconds)
