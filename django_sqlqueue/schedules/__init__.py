"""Periodic schedules: ``declare.py`` (``@schedule`` in code, checked at import), ``operations.py``
(what is done to schedule rows: the sync, the ticks' jobs, pause, resume, run now) and
``runtime.py`` (schedules made at run time: add, update, remove); their queryset is the model's
(models/schedule.py). When ticks fall and which due ones to enqueue are pure computations below
the models, in ``ticks/`` (the model describes its schedule with them). The worker's periodic
step is ``worker/scheduler.py``.

The names docs/api.md gives for ``django_sqlqueue.schedules`` are the public face of this
folder: what a project reads of its declared schedules.
"""

from .declare import ScheduleSpec, declared, tick_key

__all__ = ["ScheduleSpec", "declared", "tick_key"]
