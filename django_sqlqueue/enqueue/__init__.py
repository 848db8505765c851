"""Enqueue: from ``enqueue(task, args, kwargs, **options)`` to new rows in the job table.

``validation.py`` checks every argument and option at the call site, ``building.py`` turns them
into a new job's field values, ``inserting.py`` writes a batch of them in one statement,
``notify.py`` wakes idle workers. Below the models: their callers hand them the job model
(``enqueue_on_commit``, which waits for the business transaction's commit, is in registry.py).
"""
