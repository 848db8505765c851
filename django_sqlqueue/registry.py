"""``@job``: the front door of a function that may run as a job (the other is backend.py,
Django's Tasks framework).

A worker runs only functions registered with ``@job``; the table of them is
``enqueue/registered.py``, whose task names are keys, never dotted paths to import. A row naming
``os.system`` therefore fails with "not registered" instead of running it.
"""

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import router, transaction

from .conf import QueueSettings, require_installed
from .enqueue import building, inserting, registered, validation
from .enqueue.building import ENQUEUE_OPTIONS, PER_CALL_OPTIONS
from .enqueue.registered import (
    RegisteredTask,
    add,
    check_option_names,
    get_task,
    origin,
    registered_names,
)
from .workflows.canvas import Signature

# get_task and registered_names are documented as this module's helpers (docs/api.md).
__all__ = ["Task", "aenqueue_on_commit", "enqueue_on_commit", "get_task", "job",
           "registered_names"]


class Task(RegisteredTask):
    """A registered job function. Call it to run it here and now; ``enqueue`` it to run it later."""

    def using(self, **options) -> "Task":
        """A copy of this task with other enqueue options, e.g. ``task.using(delay=60)``."""
        check_option_names(options, allowed=ENQUEUE_OPTIONS, where="Task.using()")
        task = Task(self.func, self.name, {**self.options, **options})
        task._signature = self._signature
        return task

    def prepare(self, *args, **kwargs):
        """An unsaved, validated :class:`Job` for ``Job.objects.bulk_enqueue``."""
        from .models import Job  # not at import: @job is used before the models are ready

        return building.prepare_job(Job, self, args, kwargs)

    def enqueue(self, *args, **kwargs):
        """Insert the job now, in the current transaction of its database, and return it."""
        from .models import Job  # not at import: @job is used before the models are ready

        job = building.prepare_job(Job, self, args, kwargs)
        return inserting.insert_job(job, router.db_for_write(Job))

    def enqueue_many(self, calls) -> list:
        """One job per call in ``calls`` (a tuple of positional arguments, or a dict of keyword
        arguments, each), inserted now in as few statements as possible, in the current
        transaction of the jobs' database; returns their ids in order. Every call is checked
        before anything is inserted. ``send.enqueue_many((user.pk,) for user in users)``."""
        from .models import Job  # not at import: @job is used before the models are ready

        return Job.objects.enqueue_many(self, calls)

    def enqueue_on_commit(self, *args, **kwargs):
        """Enqueue when the transaction on "default" commits (see ``enqueue_on_commit``)."""
        return enqueue_on_commit(self, args, kwargs)

    # The async twins run their sync twin with sync_to_async(thread_sensitive=True), as
    # django.tasks' aenqueue does: on the thread of the caller's sync work, so inside its atomic
    # block they join its transaction, exactly as the sync call there would.
    async def aenqueue(self, *args, **kwargs):
        """``enqueue`` for async code: ``await task.aenqueue(...)``."""
        return await sync_to_async(self.enqueue, thread_sensitive=True)(*args, **kwargs)

    async def aenqueue_many(self, calls) -> list:
        """``enqueue_many`` for async code."""
        return await sync_to_async(self.enqueue_many, thread_sensitive=True)(calls)

    async def aenqueue_on_commit(self, *args, **kwargs):
        """``enqueue_on_commit`` for async code."""
        return await sync_to_async(self.enqueue_on_commit, thread_sensitive=True)(*args, **kwargs)

    def s(self, *args, **kwargs) -> Signature:
        """A signature of this task, a step of a workflow: ``chain(a.s(1), b.s())``. In a
        chain it gets the result of the step before as its first argument."""
        return Signature(self, args, kwargs)

    def si(self, *args, **kwargs) -> Signature:
        """An immutable signature: a step of a workflow given no parent's result."""
        return Signature(self, args, kwargs, immutable=True)


def job(func=None, /, *, name: str | None = None, **options):
    """Register a function as a job: ``@job`` or ``@job(queue="emails", max_attempts=5)``.

    Options are the defaults of every enqueue of this task (see ``Job.objects.enqueue``); they are
    validated here, so a bad queue name fails at import time rather than at the first enqueue.
    """

    if isinstance(func, str):
        raise TypeError(
            f"@job({func!r}): @job takes its options as keywords. For a queue, write "
            f"@job(queue={func!r}); for a task name, @job(name={func!r})."
        )
    if func is not None and not callable(func):
        raise TypeError(f"@job({func!r}): decorate a function, e.g. @job or @job(queue=...).")

    def register(func):
        task_name = name or f"{func.__module__}.{func.__qualname__}"
        require_installed(f"@job {task_name}")
        if "<locals>" in func.__qualname__ or "<lambda>" in func.__qualname__:
            raise ImproperlyConfigured(
                f"@job cannot register {origin(func)}: define job functions with def at module "
                "level, so that every worker imports and registers the same function."
            )
        check_option_names(
            options, allowed=ENQUEUE_OPTIONS - PER_CALL_OPTIONS, where=f"@job for {task_name}"
        )
        task = Task(func, task_name, dict(options))
        _check_options_now(task)
        add(task)
        return task

    return register(func) if func is not None else register


def enqueue_on_commit(task, args=(), kwargs=None, *, using=None, **options):
    """Validate now; insert the job when the transaction on ``using`` commits.

    For jobs kept in another database than your data (when they share one, plain ``enqueue()``
    inside ``transaction.atomic()`` is the better tool: the job commits or rolls back with the
    data). ``using`` is the alias of the transaction to wait for (default: ``"default"``), as in
    ``transaction.on_commit``. The job is written to the database the router picks for ``Job``.
    Returns the unsaved job at once; its ``pk`` is set once it has been inserted; on rollback
    it is dropped. Outside a transaction the job is inserted immediately.
    """
    from .models import Job  # not at import: @job is used before the models are ready

    job = registered.prepare(Job, task, args, kwargs, options)
    transaction.on_commit(lambda: inserting.insert_job(job, router.db_for_write(Job)),
                          using=using)
    return job


async def aenqueue_on_commit(task, args=(), kwargs=None, *, using=None, **options):
    """``enqueue_on_commit`` for async code, on the thread of the caller's sync work
    (``thread_sensitive``): the callback joins the transaction open there, if any."""
    return await sync_to_async(enqueue_on_commit, thread_sensitive=True)(
        task, args, kwargs, using=using, **options)


def _check_options_now(task) -> None:
    """Check a task's options at import time, so that a bad one fails there, not at the first
    enqueue. With invalid settings, against the default settings instead: the import must not
    fail, so that ``manage.py check`` can report sqlqueue.E001 in one line."""
    validation.not_async_transactional(task.name, task.is_async, task.options)
    try:
        task.job_defaults()
    except ImproperlyConfigured:
        building.job_defaults(task.name, task.options, QueueSettings())
