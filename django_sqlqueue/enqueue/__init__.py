"""Enqueue: from ``enqueue(task, args, kwargs, **options)`` to new rows in the job table.

``validation.py`` checks every argument and option at the call site, ``building.py`` turns them
into a new job's field values, ``inserting.py`` writes a batch of them in one statement,
``notify.py`` wakes idle workers, ``on_commit.py`` enqueues after the business transaction
commits (``enqueue_on_commit``).
"""
