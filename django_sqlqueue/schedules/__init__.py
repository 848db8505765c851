"""Periodic schedules: ``declare.py`` (``@schedule`` in code, checked at import), ``timetables.py``
(when ticks fall), ``tick_plan.py`` (which due ticks to enqueue or skip), ``operations.py``
(what is done to schedule rows: the sync, the ticks' jobs, pause, resume, run now) and
``runtime.py`` (schedules made at run time: add, update, remove); their queryset is the model's
(models/schedule.py). The worker's periodic step is ``worker/scheduler.py``.

``django_sqlqueue.schedules`` was the module ``declare.py`` is now (docs/api.md): its public names
stay importable from here.
"""

from .declare import (
    DEFAULT_CATCH_UP,
    DEFAULT_GRACE_SECONDS,
    JOB_OPTION_FIELDS,
    NAME_RE,
    ScheduleSpec,
    declared,
    register,
    schedule,
    tick_key,
)

__all__ = [
    "DEFAULT_CATCH_UP", "DEFAULT_GRACE_SECONDS", "JOB_OPTION_FIELDS", "NAME_RE", "ScheduleSpec",
    "declared", "register", "schedule", "tick_key",
]
