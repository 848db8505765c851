"""Who works: the Worker rows of running worker processes, and the Leader leases of the
cluster-wide duties one of them does at a time."""

from django.db import models


class Worker(models.Model):
    """A running worker process, as blueque keeps its listeners: who is alive, since when, doing
    how much. Rows are added at start, touched by every heartbeat, deleted at a clean exit, and
    reaped by maintenance when their heartbeat stops (their running jobs are then rescued)."""

    name = models.CharField(max_length=255, unique=True)  # also Job.claimed_by of its jobs
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()  # in its own pid namespace
    queues = models.JSONField(default=list, blank=True)  # [] means every queue
    concurrency = models.PositiveIntegerField()
    # By the database's clock, as maintenance judges them.
    started_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField()
    # Attempts, not jobs: a job retried twice counts three times.
    jobs_done = models.PositiveBigIntegerField("attempts run", default=0)
    # What proves that another process sees the same process table, so that a missing pid means
    # a dead worker (worker/identity.py): the kernel's boot id and the inode of the pid
    # namespace. A host name proves nothing: containers share them. NULL where unknown (macOS,
    # rows of older versions): such a worker is judged by its heartbeat alone.
    boot_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    pid_namespace = models.PositiveBigIntegerField(null=True, blank=True)
    # Its LEASE_SECONDS: it is silent, hence dead, after two of its own leases without a heartbeat.
    lease_seconds = models.FloatField(null=True, blank=True)
    # SQLQUEUE["VERSION"] of the code it runs, as it started (worker/health.py); NULL
    # when unset.
    version = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001

    class Meta:
        ordering = ["host", "started_at"]

    def __str__(self):
        return self.name


class Leader(models.Model):
    """Who does a cluster-wide duty, one row per duty (``"maintenance"``): a lease held by one
    worker until ``expires_at``, renewed by the holder, taken over by another once it runs out
    (worker/maintenance/leader.py). Times are the database's clock."""

    name = models.CharField(max_length=100, primary_key=True)
    holder = models.CharField(max_length=255)  # a Worker.name, or another caller's id
    elected_at = models.DateTimeField()  # start of the holder's current reign
    expires_at = models.DateTimeField()

    def __str__(self):
        return f"{self.name}: {self.holder}"
