"""ScaleEvent: the last changes of each ``runworker --autoscale`` supervisor (docs/autoscaling.md),
written by the supervisor at each change and shown by the admin dashboard. A supervisor keeps its
last ``KEEP_PER_SUPERVISOR`` rows; a row older than ``KEEP_SECONDS`` (a supervisor gone for a day)
goes at any supervisor's next change. Nothing writes here without ``--autoscale``."""

import datetime as dt

from django.db import models
from django.db.models.functions import Now

#: Rows kept per supervisor (host, pid): what the dashboard shows.
KEEP_PER_SUPERVISOR = 5
#: Rows of any supervisor are kept at most this long.
KEEP_SECONDS = 24 * 3600


class ScaleEventQuerySet(models.QuerySet):
    def record(self, *, host: str, pid: int, processes_before: int, processes: int,
               action: str, reason: str) -> "ScaleEvent":
        """Add one change of the supervisor ``(host, pid)``, then drop its rows beyond the last
        ``KEEP_PER_SUPERVISOR`` and every supervisor's rows past ``KEEP_SECONDS``."""
        event = self.create(host=host, pid=pid, processes_before=processes_before,
                            processes=processes, action=action, reason=reason[:500])
        mine = self.filter(host=host, pid=pid).order_by("-at", "-id")
        stale = list(mine.values_list("id", flat=True)[KEEP_PER_SUPERVISOR:])
        # No subquery of this table in the DELETE: MariaDB refuses one.
        self.filter(models.Q(id__in=stale)
                    | models.Q(at__lt=Now() - dt.timedelta(seconds=KEEP_SECONDS))).delete()
        return event

    def by_supervisor(self, supervisors: int = 20) -> list:
        """[((host, pid), [ScaleEvent, newest first])], the supervisors that changed last
        first, at most ``supervisors`` of them: one read of at most that many times the rows
        each keeps."""
        grouped: dict = {}
        for event in self.order_by("-at", "-id")[:supervisors * KEEP_PER_SUPERVISOR]:
            grouped.setdefault((event.host, event.pid), []).append(event)
        return list(grouped.items())[:supervisors]


class ScaleEvent(models.Model):
    """One change of a ``runworker --autoscale`` supervisor's process count, and why."""

    host = models.CharField(max_length=255)  # the supervisor's, as its workers' Worker.host
    pid = models.PositiveIntegerField()  # the supervisor's
    at = models.DateTimeField(db_default=Now())  # the database's clock
    processes_before = models.PositiveIntegerField()
    processes = models.PositiveIntegerField()
    action = models.CharField(max_length=16)  # "grow" or "shrink" (autoscale.Decision.action)
    reason = models.CharField(max_length=500)

    objects = ScaleEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["host", "pid", "at"], name="sqlqueue_scale_event_sup")]

    def __str__(self):
        return f"{self.host} pid {self.pid}: {self.processes_before} -> {self.processes}"
