"""ScheduleQuerySet: which schedules are active, paused, retired, due."""

from django.db import models

from ..db.clock import DatabaseNow


class ScheduleQuerySet(models.QuerySet):
    def active(self):
        """Schedules that tick: neither paused nor retired."""
        return self.filter(paused_at__isnull=True, retired_at__isnull=True)

    def paused(self):
        return self.filter(paused_at__isnull=False, retired_at__isnull=True)

    def retired(self):
        """Schedules that are no longer in the code; they never tick."""
        return self.filter(retired_at__isnull=False)

    def current(self):
        """Schedules still in the code, active or paused."""
        return self.filter(retired_at__isnull=True)

    def due(self, now=None):
        """Active schedules with a tick not handled yet at ``now`` (default: the database's
        clock), earliest first."""
        now = now or DatabaseNow(in_filter=True)
        return self.active().filter(next_run_at__lte=now).order_by("next_run_at", "pk")
