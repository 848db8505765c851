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
