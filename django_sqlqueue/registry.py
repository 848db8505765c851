"""Which functions may run as jobs.

A worker runs only functions registered here with ``@job``; the task name stored in a row is a key
into this registry, never a dotted path to import. A row naming ``os.system`` therefore fails with
"not registered" instead of running it.
"""

import difflib
import functools
import inspect

from asgiref.sync import sync_to_async
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

from .conf import QueueSettings, get_settings, require_installed
from .enqueue import building, on_commit, validation
from .enqueue.building import ENQUEUE_OPTIONS, PER_CALL_OPTIONS
from .exceptions import UnknownTask
from .workflows.canvas import Signature

_tasks: dict = {}
_UNREAD = object()
#: What other task queues call ``enqueue`` (Celery, RQ, Dramatiq, huey): a hint, not an alias.
_OTHER_QUEUES_METHODS = frozenset({"delay", "apply_async", "send", "send_with_options",
                                   "schedule", "s", "si"})


class Task:
    """A registered job function. Call it to run it here and now; ``enqueue`` it to run it later."""

    def __init__(self, func, name: str, options: dict):
        self.func = func
        self.name = name
        self.options = options
        self.is_async = inspect.iscoroutinefunction(func)
        self._job_defaults = None  # see job_defaults()
        self._signature = _UNREAD  # see signature()
        functools.update_wrapper(self, func)

    def __repr__(self):
        return f"<Task {self.name}>"

    def __call__(self, *args, **kwargs):
        return self.func(*args, **kwargs)

    def __getattr__(self, name):
        # Only for attributes the task does not have.
        if name in _OTHER_QUEUES_METHODS:
            raise AttributeError(
                f"{self.name} is a django-sqlqueue task: it has no .{name}(); call "
                f".enqueue(*args, **kwargs) (or .enqueue_on_commit(...), or .using(delay=...)"
                ".enqueue(...) for later)."
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def signature(self) -> inspect.Signature | None:
        """The function's signature, which enqueue binds the arguments to; None if Python
        cannot read it (some C functions). Read once."""
        if self._signature is _UNREAD:
            try:
                self._signature = inspect.signature(self.func)
            except (TypeError, ValueError):
                self._signature = None
        return self._signature

    def using(self, **options) -> "Task":
        """A copy of this task with other enqueue options, e.g. ``task.using(delay=60)``."""
        check_option_names(options, allowed=ENQUEUE_OPTIONS, where="Task.using()")
        task = Task(self.func, self.name, {**self.options, **options})
        task._signature = self._signature
        return task

    def job_defaults(self) -> building.JobDefaults:
        """This task's options, checked at the first call and again only when the settings
        change (some defaults, like the queue, come from them)."""
        conf = get_settings()
        defaults = self._job_defaults
        if defaults is None or defaults.settings is not conf:
            defaults = self._job_defaults = building.job_defaults(self.name, self.options, conf)
        return defaults

    def prepare(self, *args, **kwargs):
        """An unsaved, validated :class:`Job` for ``Job.objects.bulk_enqueue``."""
        return building.prepare_job(_job_model(), self, args, kwargs)

    def enqueue(self, *args, **kwargs):
        """Insert the job now, in the current transaction of its database, and return it."""
        job_model = _job_model()
        job = building.prepare_job(job_model, self, args, kwargs)
        return job_model.objects.enqueue_prepared(job)

    def enqueue_on_commit(self, *args, **kwargs):
        """Enqueue when the transaction on "default" commits (see ``enqueue_on_commit``)."""
        return on_commit.enqueue_on_commit(self, args, kwargs)

    # The async twins run their sync twin with sync_to_async(thread_sensitive=True), as
    # django.tasks' aenqueue does: on the thread of the caller's sync work, so inside its atomic
    # block they join its transaction, exactly as the sync call there would.
    async def aenqueue(self, *args, **kwargs):
        """``enqueue`` for async code: ``await task.aenqueue(...)``."""
        return await sync_to_async(self.enqueue, thread_sensitive=True)(*args, **kwargs)

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


@functools.cache
def _job_model():
    """The Job model, from the app registry (models/ sits above this module: importing it
    here would make a cycle), looked up once: a lookup costs a few microseconds a call."""
    require_installed("a @job task was enqueued")
    return apps.get_model("django_sqlqueue", "Job")


def check_option_names(options: dict, *, allowed: frozenset, where: str) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise TypeError(
            f"{where} got unknown option(s) {', '.join(unknown)}; "
            f"valid options are {', '.join(sorted(allowed))}."
        )


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
                f"@job cannot register {_origin(func)}: define job functions with def at module "
                "level, so that every worker imports and registers the same function."
            )
        check_option_names(
            options, allowed=ENQUEUE_OPTIONS - PER_CALL_OPTIONS, where=f"@job for {task_name}"
        )
        task = Task(func, task_name, dict(options))
        _check_options_now(task)
        existing = _tasks.get(task_name)
        if existing is not None and _origin(existing.func) != _origin(func):
            raise ImproperlyConfigured(
                f"two functions are registered as job {task_name!r} "
                f"({_origin(existing.func)} and {_origin(func)}): give one of them @job(name=...)."
            )
        _tasks[task_name] = task
        return task

    return register(func) if func is not None else register


def _check_options_now(task) -> None:
    """Check a task's options at import time, so that a bad one fails there, not at the first
    enqueue. With invalid settings, against the default settings instead: the import must not
    fail, so that ``manage.py check`` can report sqlqueue.E001 in one line."""
    validation.not_async_transactional(task.name, task.is_async, task.options)
    try:
        task.job_defaults()
    except ImproperlyConfigured:
        building.job_defaults(task.name, task.options, QueueSettings())


def _origin(func) -> str:
    return f"{func.__module__}.{func.__qualname__}"


def get_task(name: str) -> Task:
    try:
        return _tasks[name]
    except KeyError:
        raise UnknownTask(
            f"task {name!r} is not registered in this process: decorate it with "
            "@django_sqlqueue.job in a module that is imported at start-up (an installed app's "
            "tasks.py or jobs.py is imported automatically), and deploy workers with the same "
            f"code. {_renamed_hint(name)}"
        ) from None


def _renamed_hint(name) -> str:
    """A row's name is the function's at enqueue time: a function moved or renamed since
    leaves its queued jobs naming the old one."""
    tail = str(name).rpartition(".")[2]
    same_tail = sorted(other for other in _tasks if other.rpartition(".")[2] == tail)
    close = same_tail or difflib.get_close_matches(str(name), sorted(_tasks), n=1, cutoff=0.8)
    moved = f" (is it {close[0]!r} now?)" if close else ""
    return (f"If the function was moved or renamed{moved}, keep its old name with "
            f"@job(name={name!r}) so that the jobs queued under it still run.")


def resolve(task) -> Task:
    """Accept a Task or a registered name; anything else is refused with a clear error."""
    if isinstance(task, Task):
        return task
    if isinstance(task, str):
        return get_task(task)
    raise UnknownTask(
        f"{task!r} is not a job: decorate the function with @django_sqlqueue.job and enqueue "
        "the decorated function or its registered name."
    )


def registered_names() -> list:
    return sorted(_tasks)


def default_queues() -> set:
    """The queues the registered tasks enqueue to unless a call names another."""
    return {task.job_defaults().fields["queue"] for task in _tasks.values()}
