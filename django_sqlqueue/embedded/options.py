"""``SQLQUEUE["EMBEDDED_WORKER"]`` read into the ``WorkerConfig`` of the embedded worker.

``True`` takes the defaults below; a dict names some of them::

    SQLQUEUE = {"EMBEDDED_WORKER": {"QUEUES": ["default"], "CONCURRENCY": 2}}

The defaults are smaller than ``runworker``'s: the threads share the web process's CPU (and
its GIL) with the requests.
"""

from django.core.exceptions import ImproperlyConfigured

from ..conf import get_settings
from ..worker.config import InvalidWorkerOption, WorkerConfig

#: Each key, the ``WorkerConfig`` field it sets and its default here.
KEYS = {
    "QUEUES": ("queues", None),  # None: every queue
    "CONCURRENCY": ("concurrency", 2),  # job threads in each web process
    "ASYNC_CONCURRENCY": ("async_concurrency", None),  # None: SQLQUEUE["ASYNC_CONCURRENCY"]
    # How long the running jobs may finish when the server stops, before they are given back.
    # Under gunicorn, capped below its graceful_timeout (embedded/gunicorn.py).
    "SHUTDOWN_TIMEOUT_SECONDS": ("shutdown_timeout", 20.0),
    "SCHEDULER": ("scheduler", True),  # enqueue the ticks of periodic schedules
    "DATABASE": ("database", None),  # None: where the routers send Job's writes
    "NAME": ("name", None),  # prefix of the worker's name; None: the host name
}


def enabled() -> bool:
    """Whether the setting asks for an embedded worker."""
    return get_settings().EMBEDDED_WORKER not in (False, None)


def worker_config(**overrides) -> WorkerConfig:
    """The embedded worker's options: the setting's, then ``overrides`` (``WorkerConfig``
    fields, as a server's hook passes them). ``ImproperlyConfigured`` names a wrong key or
    value and its fix."""
    setting = get_settings().EMBEDDED_WORKER
    given = setting if isinstance(setting, dict) else {}
    unknown = sorted(set(given) - set(KEYS))
    if unknown:
        raise ImproperlyConfigured(
            f"settings.SQLQUEUE['EMBEDDED_WORKER'] has unknown key(s) {', '.join(unknown)}; "
            f"the valid keys are {', '.join(KEYS)}.")
    values = {field: given.get(key, default) for key, (field, default) in KEYS.items()}
    values.update(overrides)
    try:
        return WorkerConfig(**values)
    except (InvalidWorkerOption, TypeError) as exc:
        raise ImproperlyConfigured(
            f"settings.SQLQUEUE['EMBEDDED_WORKER']: {exc} (the options are named as the keys "
            f"{', '.join(KEYS)}, not runworker's flags).") from None
