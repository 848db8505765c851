"""The rollup of finished jobs per minute and hour that throughput is read from."""

from django.db import models

from ..statuses import JobStatus


class ThroughputCount(models.Model):
    """How many jobs of a queue and task ended with a final status in one minute or one hour:
    the rollup the dashboard and ``manage.py stats`` read throughput from, so that counting a
    week of finished jobs reads a few hundred rows, not millions (worker/maintenance/rollup.py
    writes them; observability/throughput.py reads them). Kept after the jobs themselves are
    pruned."""

    MINUTE, HOUR = 60, 3600

    period_seconds = models.PositiveIntegerField()  # MINUTE or HOUR
    bucket_at = models.DateTimeField()  # the start of the minute or hour, UTC
    queue = models.CharField(max_length=100)
    task_name = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=JobStatus.choices)  # a final status
    count = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["period_seconds", "bucket_at", "queue", "task_name", "status"],
                name="sqlqueue_throughput_bucket",
            ),
        ]

    def __str__(self):
        return f"{self.queue} {self.task_name} {self.status} @ {self.bucket_at}: {self.count}"


class ThroughputCursor(models.Model):
    """One row: every job that finished before ``rolled_up_to`` is counted in ThroughputCount;
    later ones are counted from the job table itself. Moved forward, fenced on its old value,
    in the same transaction as the counts it covers."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    rolled_up_to = models.DateTimeField()

    def __str__(self):
        return f"rolled up to {self.rolled_up_to}"
