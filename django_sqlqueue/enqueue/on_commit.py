"""Enqueue after the business transaction commits, for jobs kept in another database.

When the jobs table is in the same database as your data, plain ``enqueue()`` inside
``transaction.atomic()`` is the better tool: the job commits or rolls back with the data.
``enqueue_on_commit`` is for when they are in different databases (aliases): it waits for the
transaction on ``using`` to commit, then inserts the job; on rollback the job is dropped.
"""

from asgiref.sync import sync_to_async
from django.db import router, transaction

from .inserting import insert_job
from .registered import prepare


def enqueue_on_commit(task, args=(), kwargs=None, *, using=None, **options):
    """Validate now; insert the job when the transaction on ``using`` commits.

    ``using`` is the alias of the transaction to wait for (default: ``"default"``), as in
    ``transaction.on_commit``. The job is written to the database the router picks for ``Job``.
    Returns the unsaved job at once; its ``pk`` is set once it has been inserted. Outside a
    transaction the job is inserted immediately.
    """
    from ..models import Job  # not at import: the package's face imports this module

    job = prepare(Job, task, args, kwargs, options)
    transaction.on_commit(lambda: insert_job(job, router.db_for_write(Job)), using=using)
    return job


async def aenqueue_on_commit(task, args=(), kwargs=None, *, using=None, **options):
    """``enqueue_on_commit`` for async code, on the thread of the caller's sync work
    (``thread_sensitive``): the callback joins the transaction open there, if any."""
    return await sync_to_async(enqueue_on_commit, thread_sensitive=True)(
        task, args, kwargs, using=using, **options)
