"""Queue: what operators set for one queue (a pause, and limits), read by every claim."""

from django.db import models
from django.db.models import Q


class Queue(models.Model):
    """What operators set for one queue, read by every worker's claim (docs/limits.md): a pause,
    and limits on running jobs and on starts, for the whole queue and for each concurrency key.

    A queue needs no row: without one (or with every limit empty and no pause) its jobs are
    claimed by the plain single-statement claim. Rows are written by ``queue_control`` (code,
    the admin, ``manage.py queues``). The claim of a limited queue updates the row first, which
    serialises the claims of that queue (a row lock on PostgreSQL, the write lock on SQLite),
    and keeps the start times the rate limits count in ``recent_starts``.
    """

    name = models.CharField(max_length=100, unique=True)  # a Job.queue
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.CharField(max_length=150, blank=True)
    # Empty means no limit. Running jobs of the queue at once, across every worker and host.
    concurrency_limit = models.PositiveIntegerField(null=True, blank=True)
    # Starts per rate period, of the whole queue and of each concurrency key.
    rate_limit = models.PositiveIntegerField(null=True, blank=True)
    rate_period_seconds = models.FloatField(default=1.0)
    # Running jobs at once, and starts per rate period, of each concurrency key of the queue.
    key_concurrency_limit = models.PositiveIntegerField(null=True, blank=True)
    key_rate_limit = models.PositiveIntegerField(null=True, blank=True)
    # The claim's own bookkeeping: {"": [start, ...], key: [start, ...]}, POSIX seconds by the
    # database's clock, of the starts still inside the rate period.
    recent_starts = models.JSONField(default=dict, blank=True, editable=False)
    last_claim_at = models.DateTimeField(null=True, blank=True, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [("pause_queue", "Can pause and resume queues")]
        constraints = [
            models.CheckConstraint(condition=Q(rate_period_seconds__gt=0),
                                   name="sqlqueue_queue_rate_period_positive"),
        ]

    def __str__(self):
        return self.name

    @property
    def is_paused(self) -> bool:
        return self.paused_at is not None

    @property
    def is_limited(self) -> bool:
        """Whether the claim of this queue must count (one limit or more is set)."""
        return any(limit is not None for limit in (
            self.concurrency_limit, self.rate_limit, self.key_concurrency_limit,
            self.key_rate_limit))

    def describe_limits(self) -> str:
        """``3 running, 10 starts per 1 s; per key: 1 running`` or ``none``."""
        period = f"{self.rate_period_seconds:g} s"
        whole = [f"{self.concurrency_limit} running" if self.concurrency_limit is not None else "",
                 f"{self.rate_limit} starts per {period}" if self.rate_limit is not None else ""]
        key = [f"{self.key_concurrency_limit} running"
               if self.key_concurrency_limit is not None else "",
               f"{self.key_rate_limit} starts per {period}"
               if self.key_rate_limit is not None else ""]
        text = ", ".join(part for part in whole if part)
        if any(key):
            text += ("; " if text else "") + "per key: " + ", ".join(part for part in key if part)
        return text or "none"
