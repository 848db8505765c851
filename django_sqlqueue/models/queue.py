"""Queue: what operators set for one queue (a pause, limits, fair shares), read by claims."""

import math

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from ..exceptions import InvalidQueueLimit


def check_key_weights(weights) -> dict:
    """``weights`` as a queue's ``key_weights``: {concurrency key: a number above 0} ("" is the
    jobs without a key; a key not named weighs 1). Raises InvalidQueueLimit naming the fix."""
    if weights is None:
        return {}
    if not isinstance(weights, dict):
        raise InvalidQueueLimit(
            f"key weights are a dict of {{concurrency key: weight}}, e.g. {{'gold': 3}}, not "
            f"{weights!r}.")
    for key, weight in weights.items():
        if not isinstance(key, str) or len(key) > 255:
            raise InvalidQueueLimit(
                f"a key weight's key is a concurrency key (a string of at most 255 characters; "
                f"'' for the jobs without one), not {key!r}.")
        if (isinstance(weight, bool) or not isinstance(weight, (int, float))
                or not math.isfinite(weight) or not weight > 0):
            raise InvalidQueueLimit(
                f"the weight of key {key!r} must be a number above 0 (1 is a plain share), "
                f"not {weight!r}.")
    return dict(weights)


def _valid_key_weights(value):
    try:
        check_key_weights(value)
    except InvalidQueueLimit as exc:
        raise ValidationError(str(exc)) from None


class Queue(models.Model):
    """What operators set for one queue, read by every worker's claim (docs/limits.md): a pause,
    limits on running jobs and on starts, for the whole queue and for each concurrency key,
    and fair shares between the concurrency keys (``fair``, ``key_weights``).

    A queue needs no row: without one (or with every limit empty and no pause) its jobs are
    claimed by the plain single-statement claim. Rows are written by ``queues/control.py`` (code,
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
    # Fair shares (docs/fairness.md): claims rotate between the concurrency keys of the ready
    # jobs, each key's share in proportion to its weight in ``key_weights`` (1 if not named).
    fair = models.BooleanField(default=False, db_default=False)
    key_weights = models.JSONField(default=dict, blank=True, validators=[_valid_key_weights])
    # No longer read or written: the fair claim's bookkeeping now lives in each worker
    # process (claim/fair.py). The column stays for one release so that the
    # workers of the previous one, which read and write it, keep claiming during a rolling
    # upgrade (a dropped column would fail every claim of theirs on a limited or fair queue).
    fair_state = models.JSONField(default=dict, blank=True, editable=False)
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
        """Whether the claim of this queue must count (one limit or more is set, or fair
        shares)."""
        return self.fair or any(limit is not None for limit in (
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
        if self.fair:
            weights = ", ".join(f"{key or '(no key)'}={weight:g}"
                                for key, weight in sorted((self.key_weights or {}).items()))
            text += (("; " if text else "") + "fair shares per key"
                     + (f" (weights {weights})" if weights else ""))
        return text or "none"
