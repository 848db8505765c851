"""The throughput rollup: count the jobs that finished, per minute and per hour, queue, task and
final status, into ThroughputCount, so that throughput over a week reads a few hundred rows
instead of every finished job (today's full count by status: 0.9 s at a million jobs).

A maintenance step of the leader. Each run counts the whole minutes from the cursor
(ThroughputCursor) up to ``delay_seconds`` before now, through the ``sqlqueue_job_finished``
index, adds the counts to their minute and hour rows and moves the cursor, in one short
transaction whose first write is the cursor's fenced move: a former leader still finishing a
run cannot add the same minutes twice. Jobs that finished after the cursor are counted from the
job table by whoever reads (observability/throughput.py), so the numbers are current to the second.

Why a delay: ``finished_at`` is the worker host's clock when the outcome was decided, and the
outcome is written a little later (the batched outcome writer flushes within a second), while
the cursor follows the database's clock. A job whose outcome commits more than
``delay_seconds`` after the database's clock passed its ``finished_at`` (a write held up that
long, or a worker host whose clock is that far behind the database's) is missed by the rollup:
counted neither there nor in the tail. With clocks kept by NTP, outcomes commit within a second.
Why not counters kept by the outcome writer:
every worker would update the same few counter rows in its outcome transactions, serialising
them on those rows' locks, and the other ways a job ends (the rescuer, the expirer, cancel)
would each need the same; the rollup costs the hot path one index entry per finished job.
"""

import datetime as dt
from dataclasses import dataclass

from django.db import connections
from django.db.models import Count
from django.db.models.functions import TruncMinute

from ...db import ops
from ...db.batches import short_transaction, write_lock_first
from ...db.clock import database_now
from ...models import Job, ThroughputCount, ThroughputCursor
from ...statuses import FINISHED_STATUSES
from .steps import check, positive

MINUTE, HOUR = ThroughputCount.MINUTE, ThroughputCount.HOUR
ROWS_PER_STATEMENT = 2000  # SQLite's VALUES list: 6 parameters a row, at most 32,766


@dataclass(frozen=True)
class RollupConfig:
    # Minutes are rolled up once they ended this long ago (see the module's docstring).
    delay_seconds: float = 60.0
    # Where a new cursor starts, back from now: the longest window shown (7 days).
    history_seconds: float = 7 * 86400.0
    # The most of finished_at's range one transaction reads; a backlog (the first run on a big
    # table) is rolled up over several transactions, and over several passes past run_spans.
    span_seconds: float = 6 * 3600.0
    run_spans: int = 32
    # Minute rows are deleted this long after their minute (the dashboard's chart shows the
    # last hour), hour rows this long after their hour (it shows 7 days).
    keep_minutes_seconds: float = 3 * 3600.0
    keep_hours_seconds: float = 8 * 86400.0
    # PostgreSQL: time limit of each transaction's statements (None: none).
    statement_timeout_seconds: float | None = 10.0

    def __post_init__(self):
        check(self, positive(self, "delay_seconds", "history_seconds", "span_seconds",
                             "run_spans", "keep_minutes_seconds", "keep_hours_seconds")
              + positive(self, "statement_timeout_seconds", none_allowed=True))


@dataclass(frozen=True)
class RollupResult:
    jobs: int = 0  # finished jobs counted this run
    rolled_up_to: dt.datetime | None = None  # the cursor after the run
    done: bool = True  # False: a backlog is left for the next run


def floor_minute(moment: dt.datetime) -> dt.datetime:
    return moment.replace(second=0, microsecond=0)


def floor_hour(moment: dt.datetime) -> dt.datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


class Rollup:
    def __init__(self, config: RollupConfig | None = None, *, alias: str):
        self.config = config or RollupConfig()
        self.alias = alias

    def run_once(self, now=None, *, keep_going=None) -> RollupResult:
        """Roll up every whole minute that ended ``delay_seconds`` before now (the database's
        clock, or ``now``), ``span_seconds`` per transaction, at most ``run_spans`` of them;
        ``keep_going()`` is asked between transactions."""
        config = self.config
        now = now or database_now(self.alias)
        target = floor_minute(now - dt.timedelta(seconds=config.delay_seconds))
        jobs, cursor = 0, None
        for _ in range(config.run_spans):
            with short_transaction(self.alias, config.statement_timeout_seconds):
                moved = self._roll_span(now, target)
            if moved is None:  # up to date, or another process moved the cursor
                return RollupResult(jobs=jobs, rolled_up_to=cursor, done=True)
            counted, cursor = moved
            jobs += counted
            if cursor >= target:
                break
            if keep_going is not None and not keep_going():
                break
        return RollupResult(jobs=jobs, rolled_up_to=cursor, done=cursor is None or cursor >= target)

    def _roll_span(self, now, target):
        """One transaction: (jobs counted, new cursor), or None if there was nothing to do."""
        config = self.config
        write_lock_first(self.alias, ThroughputCursor)  # it reads the cursor, then writes
        cursors = ThroughputCursor.objects.using(self.alias)
        # Nothing older than the history is shown: a new cursor starts there, and an old one
        # (no leader for days) jumps there rather than rolling up what no one will read.
        oldest = floor_hour(now - dt.timedelta(seconds=config.history_seconds))
        read = cursors.filter(pk=1).values_list("rolled_up_to", flat=True).first()
        if read is None:
            _, created = cursors.get_or_create(pk=1, defaults={"rolled_up_to": oldest})
            if not created:
                return None
            read = oldest
        start = max(read, oldest)
        if start >= target:
            return None
        end = min(target, start + dt.timedelta(seconds=config.span_seconds))
        # The fence: of two processes that read the same cursor, one moves it; the other's
        # UPDATE matches no row (PostgreSQL: after waiting for the first one's commit).
        if not cursors.filter(pk=1, rolled_up_to=read).update(rolled_up_to=end):
            return None
        rows = (
            Job.objects.using(self.alias)
            .filter(finished_at__gte=start, finished_at__lt=end, status__in=FINISHED_STATUSES)
            .annotate(minute=TruncMinute("finished_at"))
            .values_list("minute", "queue", "task_name", "status")
            .annotate(n=Count("pk"))
            .order_by()
        )
        buckets: dict = {}
        counted = 0
        # Minute rows only as far back as they are kept (a backlog needs its hours alone).
        keep_minutes_from = now - dt.timedelta(seconds=config.keep_minutes_seconds)
        for minute, queue, task_name, status, n in rows:
            counted += n
            key = (HOUR, floor_hour(minute), queue, task_name, status)
            buckets[key] = buckets.get(key, 0) + n
            if minute >= keep_minutes_from:
                buckets[(MINUTE, minute, queue, task_name, status)] = n
        if buckets:
            self._add(buckets)
        self._forget(now)
        return counted, end

    def _add(self, buckets: dict) -> None:
        connection = connections[self.alias]
        rows = [(*key, n) for key, n in sorted(buckets.items())]  # one lock order for all
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            text, params = ops(connection).add_throughput_counts(
                ThroughputCount, rows[start:start + ROWS_PER_STATEMENT])
            with connection.cursor() as cursor:
                cursor.execute(text, params)

    def _forget(self, now) -> None:
        counts = ThroughputCount.objects.using(self.alias)
        config = self.config
        counts.filter(period_seconds=MINUTE, bucket_at__lt=now - dt.timedelta(
            seconds=config.keep_minutes_seconds)).delete()
        counts.filter(period_seconds=HOUR, bucket_at__lt=now - dt.timedelta(
            seconds=config.keep_hours_seconds)).delete()
