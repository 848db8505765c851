"""Which queue names a project uses, for the commands that take one: a typo in
``runworker -q`` or ``queues pause`` should be told, not served or paused in silence."""

import difflib

from ..enqueue import registered
from ..models import Job
from ..queues import control


def queues_of_registered_tasks() -> set | None:
    """The queues of the registered ``@job`` tasks and of this project's django.tasks backends
    of this package; None if such a backend accepts every queue (``QUEUES`` empty)."""
    queues = registered.default_queues()
    try:
        from django.tasks import task_backends  # Django 6+
    except ImportError:
        return queues
    from ..backend import SQLQueueBackend

    for backend in task_backends.all():
        if isinstance(backend, SQLQueueBackend):
            if not backend.queues:
                return None
            queues |= set(backend.queues)
    return queues


def known_queues(alias) -> set:
    """Every queue name in use: a registered task's or backend's, one with ready or running
    jobs, or one with a Queue row (paused, limited, fair)."""
    running = Job.objects.using(alias).running().values_list("queue", flat=True).distinct()
    return ((queues_of_registered_tasks() or set()) | control.known_names(using=alias)
            | set(running))


def did_you_mean(name, known) -> str:
    """`` (did you mean 'emails'?)``, or nothing."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
