"""A schedule's ticks, pure computations below the models: ``timetables.py`` (when they fall: a
cron expression in a time zone, or an interval) and ``tick_plan.py`` (which due ticks to
enqueue or skip, by the missed-tick policy). ``schedules/`` and ``models/schedule.py`` use them.
"""
