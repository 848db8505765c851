"""The table of the functions that may run as jobs, by task name, and what a registered function
knows of itself.

``@job`` (registry.py, the front door) registers a function here; the runner finds a row's
function here by its task name, and the enqueue paths resolve a task or a name here. A task name
is a key into this table, never a dotted path to import: a row naming ``os.system`` fails with
"not registered" instead of running it.
"""

import difflib
import functools
import inspect

from django.core.exceptions import ImproperlyConfigured

from ..conf import get_settings
from ..exceptions import UnknownTask
from . import building

_tasks: dict = {}
_UNREAD = object()
#: What other task queues call ``enqueue`` (Celery, RQ, Dramatiq, huey): a hint, not an alias.
_OTHER_QUEUES_METHODS = frozenset({"delay", "apply_async", "send", "send_with_options",
                                   "schedule", "s", "si"})


class RegisteredTask:
    """A registered job function: its name, options and signature. Call it to run it here and
    now. ``registry.Task`` adds the ways to enqueue it."""

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

    def job_defaults(self) -> building.JobDefaults:
        """This task's options, checked at the first call and again only when the settings
        change (some defaults, like the queue, come from them)."""
        conf = get_settings()
        defaults = self._job_defaults
        if defaults is None or defaults.settings is not conf:
            defaults = self._job_defaults = building.job_defaults(self.name, self.options, conf)
        return defaults


def add(task: RegisteredTask) -> None:
    """Register ``task`` under its name; a name taken by another function is refused."""
    existing = _tasks.get(task.name)
    if existing is not None and origin(existing.func) != origin(task.func):
        raise ImproperlyConfigured(
            f"two functions are registered as job {task.name!r} "
            f"({origin(existing.func)} and {origin(task.func)}): give one of them "
            "@job(name=...)."
        )
    _tasks[task.name] = task


def origin(func) -> str:
    return f"{func.__module__}.{func.__qualname__}"


def check_option_names(options: dict, *, allowed: frozenset, where: str) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise TypeError(
            f"{where} got unknown option(s) {', '.join(unknown)}; "
            f"valid options are {', '.join(sorted(allowed))}."
        )


def prepare(model, task, args, kwargs, options: dict):
    """An unsaved, validated job of ``task`` (a Task or a registered name) with per-call
    ``options``: what ``Job.objects.prepare`` and ``enqueue_on_commit`` make."""
    check_option_names(options, allowed=building.ENQUEUE_OPTIONS, where="enqueue()")
    return building.prepare_job(model, resolve(task), args, kwargs, options)


def get_task(name: str) -> RegisteredTask:
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


def resolve(task) -> RegisteredTask:
    """Accept a Task or a registered name; anything else is refused with a clear error."""
    if isinstance(task, RegisteredTask):
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
