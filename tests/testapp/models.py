from django.db import models


class Order(models.Model):
    """Business data kept in the same database as the jobs ("default")."""

    total = models.IntegerField()


class ExternalOrder(models.Model):
    """Business data kept in another database ("other"), as routed by OrdersOnOther."""

    total = models.IntegerField()


class Execution(models.Model):
    """One row per run of a job, so tests count executions instead of guessing."""

    job_id = models.BigIntegerField()
    attempt = models.IntegerField()
    worker = models.CharField(max_length=255)
    tag = models.CharField(max_length=100, blank=True)


class Run(models.Model):
    """One execution of a chaos-test job (tests/chaos), keyed by (job id, attempt).

    Written when the job function starts and updated when it ends, so a run whose worker died
    mid-job has no ``finished_at``. The unique key makes two executions of one claim impossible to
    miss: the second insert would fail the job.
    """

    job_id = models.BigIntegerField()
    attempt = models.IntegerField()
    worker = models.CharField(max_length=255)  # Job.claimed_by: "name:pid:suffix"
    pid = models.IntegerField()
    key = models.CharField(max_length=100, blank=True)  # what the scenario passed in
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job_id", "attempt"], name="run_once_per_attempt"),
        ]


class Stock(models.Model):
    """Stock of one product, for the durable steps' example (docs/steps.md)."""

    sku = models.CharField(max_length=50, unique=True)
    available = models.IntegerField()
