"""Settings, read from ``settings.SQLQUEUE`` when first needed (never at import), with defaults.

::

    SQLQUEUE = {
        "DEFAULT_QUEUE": "default",
        "MAX_ATTEMPTS": 5,
        "LEASE_SECONDS": 60,
        ...
    }

Unknown keys and values of the wrong type raise ``ImproperlyConfigured`` naming the key, and the
``sqlqueue.E001`` system check reports the same problem at ``manage.py check`` time.

Valid settings are checked once and kept until Django reports a change of ``SQLQUEUE`` (the
``setting_changed`` signal, sent by ``override_settings`` and pytest-django's ``settings``), so
reading them costs nothing per enqueue. Invalid settings are never kept: every call raises.
"""

import difflib
import math
import re
from dataclasses import dataclass, fields

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

# The queue-name rule (validation.py imports it from here, as settings must not import validation).
QUEUE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
#: A maintenance batch is one transaction: past this many rows it holds too many locks for too
#: long, which is what batches are for.
MAX_MAINTENANCE_BATCH_SIZE = 100_000


@dataclass(frozen=True)
class QueueSettings:
    # Queue a job goes to when neither the task nor the caller names one.
    DEFAULT_QUEUE: str = "default"
    # Attempts (the first run included) before a failing job is marked exhausted.
    MAX_ATTEMPTS: int = 5
    # Interruptions (its worker died while running it, or its database went away under it)
    # after which a job is not run again: it ends exhausted, saying so. An interruption is not
    # an attempt: it never uses one of MAX_ATTEMPTS. The bound stops a job that kills its worker
    # (a segfault, the OOM killer) from taking the fleet down forever (docs/reliability.md).
    MAX_INTERRUPTIONS: int = 3
    # A worker that does not know a job's task (its code older than the job's, in a rolling
    # deploy) gives the job back without using an attempt, due this many seconds later, for a
    # worker that knows it; until the task has been unknown for UNKNOWN_TASK_MAX_SECONDS, after
    # which the job ends exhausted with UnknownTask (run/unknown.py says why these defaults).
    UNKNOWN_TASK_DELAY_SECONDS: float = 5.0
    UNKNOWN_TASK_MAX_SECONDS: float = 3600.0
    # Retry delay after the failure of attempt n: BACKOFF_SECONDS * 2**(n-1), clamped to
    # [MIN_RETRY_DELAY_SECONDS, MAX_RETRY_DELAY_SECONDS], then spread by +/- RETRY_JITTER.
    BACKOFF_SECONDS: float = 5.0
    MIN_RETRY_DELAY_SECONDS: float = 1.0
    MAX_RETRY_DELAY_SECONDS: float = 3600.0
    RETRY_JITTER: float = 0.1
    # How long a claimed job belongs to its worker before it may be rescued. Workers renew the
    # leases of running jobs every LEASE_SECONDS / 3, so a killed worker's jobs run again about
    # one lease after the kill. Shorter: faster recovery, more heartbeat writes.
    LEASE_SECONDS: float = 30.0
    # How often a worker writes the progress its jobs report (report_progress): at most one
    # UPDATE per interval for all its jobs whose value changed, whatever their rate of reports.
    PROGRESS_INTERVAL_SECONDS: float = 0.5
    # Per-job time limit (None: no limit); a job over it fails with a timeout error.
    TIMEOUT_SECONDS: float | None = None
    # The time limit of a transactional job (docs/transactional-jobs.md) when it names none, and
    # the longest it may name: its row stays locked while it runs, so the limit bounds the lock.
    TRANSACTIONAL_TIMEOUT_SECONDS: float = 30.0
    # A running job asked to cancel that has not stopped this long after its worker learned of
    # it is stopped: under --processes its process exits (after its other jobs finish) and is
    # replaced; in one process its thread is abandoned, still holding its slot until it returns.
    CANCEL_GRACE_SECONDS: float = 10.0
    # Async jobs (``async def``) each worker process runs at once on its event loop, beside its
    # --concurrency threads for sync jobs (docs/async-jobs.md); 0: async jobs run on the threads.
    ASYNC_CONCURRENCY: int = 100
    # An async job that blocks the event loop this long is logged by name (a warning).
    ASYNC_BLOCK_WARNING_SECONDS: float = 0.5
    # Workers poll this often (with +/-20% jitter) even when LISTEN/NOTIFY wakes them.
    POLL_INTERVAL_SECONDS: float = 1.0
    # A worker whose claims (from the front of claim order) took longer than this, three in a
    # row, claims only the jobs after the last one it claimed, so that its scan skips what is
    # left in the ready index of the jobs claimed since vacuum last passed: behind a long
    # transaction elsewhere, or in a backlog drained faster than vacuum visits (a claim of a
    # quiet queue takes under a millisecond; claim/bounded.py). None: never; claims always in
    # exact claim order.
    SLOW_CLAIM_SECONDS: float | None = 0.002
    # While it does, it still claims from the front at least this often: the longest a job
    # sorted before its last claimed one (a higher priority, a retry come due) waits for that.
    FULL_CLAIM_INTERVAL_SECONDS: float = 1.0
    # PostgreSQL: enqueue sends NOTIFY so idle workers wake at once. Turn off behind PgBouncer
    # in transaction pooling mode, where LISTEN does not work; polling then does the job.
    NOTIFY: bool = True
    # At most this many NOTIFYs per queue per second from one process (after a burst of 5): each
    # notifying commit takes a server-wide lock (notify.py). A job enqueued in between is found by
    # the worker's second look, 2 / NOTIFY_PER_SECOND after a wake-up. None: notify every time.
    NOTIFY_PER_SECOND: float | None = 20.0
    # How many idle workers, on average, claim on one NOTIFY: with N workers serving its queue,
    # each claims with chance CLAIMERS_PER_NOTIFY / N (always when N is that or fewer); the
    # others leave the job to them and to their poll. None: every worker claims on every NOTIFY
    # (with hundreds of idle workers, hundreds of claims race for each job: worker/wakeup.py).
    CLAIMERS_PER_NOTIFY: int | None = 6
    # Where workers LISTEN: an alias of DATABASES or a libpq connection string reaching PostgreSQL
    # directly, not through a transaction-pooling PgBouncer (listening.py). None: the jobs
    # database itself, unless it has DISABLE_SERVER_SIDE_CURSORS (a pooler): then polling only.
    LISTEN_DATABASE: str | None = None
    # Waiting for a job (Job.wait_finished, docs/waiting.md): a waiter that no NOTIFY can wake
    # (SQLite, MariaDB, PostgreSQL behind a pooler without LISTEN_DATABASE) reads the job's
    # status after WAIT_POLL_MIN_SECONDS, then twice as long each time up to
    # WAIT_POLL_MAX_SECONDS; one woken by NOTIFY still reads it every WAIT_POLL_MAX_SECONDS
    # (a cancel of a queued job or an expiry sends no NOTIFY).
    WAIT_POLL_MIN_SECONDS: float = 0.01
    WAIT_POLL_MAX_SECONDS: float = 0.5
    # Alias of DATABASES (a replica of the jobs database) that the admin's dashboard, manage.py
    # stats and the metrics view read from, showing how far behind it is. None: the dashboard and
    # the metrics view read where the database routers send reads of Job (db_for_read), stats
    # from the jobs database. Writes and the claim never use it (docs/topology.md).
    READ_DATABASE: str | None = None
    # How often a worker runs maintenance: expire, rescue lost leases, prune, reap dead workers.
    # One worker at a time, the leader, does it (worker/maintenance/leader.py); the leader's
    # term is three intervals, so a dead leader is replaced within about that.
    MAINTENANCE_INTERVAL_SECONDS: float = 5.0
    # Rows per statement in maintenance's expire, rescue and prune steps; each batch is its own
    # short transaction. Larger: fewer round trips, longer row locks.
    MAINTENANCE_BATCH_SIZE: int = 1000
    # PostgreSQL: longest a statement of a maintenance batch may run (SET LOCAL statement_timeout);
    # a batch over it fails alone and the step tries again at the next pass. None: no limit.
    MAINTENANCE_STATEMENT_TIMEOUT_SECONDS: float | None = 10.0
    # How often each worker's scheduler looks for due periodic schedules (docs/schedules.md): a
    # tick is enqueued this long after its time at most, while any worker runs. Every worker
    # looks (one indexed SELECT of the schedule table); the database lets one enqueue each tick.
    SCHEDULER_INTERVAL_SECONDS: float = 1.0
    # How often the leader looks for finished jobs to prune (it reads them without an index);
    # a backlog too large for one go is worked through at the passes after, not an interval later.
    PRUNE_INTERVAL_SECONDS: float = 600.0
    # Finished jobs are deleted this long after they finished (None: keep them).
    KEEP_SUCCEEDED_SECONDS: float | None = 7 * 24 * 3600.0
    KEEP_FAILED_SECONDS: float | None = 30 * 24 * 3600.0  # exhausted, cancelled, expired
    # runworker --autoscale MIN:MAX (docs/autoscaling.md): more processes once the oldest due job
    # has waited longer than AUTOSCALE_TARGET_WAIT_SECONDS; one process fewer after slots sat idle
    # for AUTOSCALE_COOLDOWN_SECONDS; the supervisor measures every AUTOSCALE_INTERVAL_SECONDS.
    AUTOSCALE_TARGET_WAIT_SECONDS: float = 5.0
    AUTOSCALE_COOLDOWN_SECONDS: float = 60.0
    AUTOSCALE_INTERVAL_SECONDS: float = 2.0
    # Largest accepted payload (args and kwargs as JSON), so a mistake cannot bloat the table.
    MAX_PAYLOAD_BYTES: int = 1_000_000
    # Longest traceback kept per failed attempt.
    MAX_TRACEBACK_CHARS: int = 20_000
    # Modules imported from every installed app at start-up, so their @job functions register.
    TASK_MODULES: tuple = ("tasks", "jobs")
    # A worker inside the web server's processes (docs/operations.md, "A worker in the web
    # process"): False (the default) or True, or a dict of its options (QUEUES, CONCURRENCY,
    # ...; embedded/options.py). The server's hooks start it only when this is on.
    EMBEDDED_WORKER: bool | dict = False
    # This code's version (a release tag, a commit): each worker records it with its row, and
    # ``healthcheck ready`` finds a worker of the host that runs another one (code deployed but
    # the worker not restarted). None: not recorded, not checked.
    VERSION: str | None = None


#: Async jobs at once per worker process, at most: past a few thousand, one loop's scheduling
#: and the one ORM thread their database calls share are the limit; run more processes.
MAX_ASYNC_CONCURRENCY = 10_000

_TYPES = {
    "DEFAULT_QUEUE": (str,),
    "MAX_ATTEMPTS": (int,),
    "MAX_INTERRUPTIONS": (int,),
    "UNKNOWN_TASK_DELAY_SECONDS": (int, float),
    "UNKNOWN_TASK_MAX_SECONDS": (int, float),
    "BACKOFF_SECONDS": (int, float),
    "MIN_RETRY_DELAY_SECONDS": (int, float),
    "MAX_RETRY_DELAY_SECONDS": (int, float),
    "RETRY_JITTER": (int, float),
    "LEASE_SECONDS": (int, float),
    "PROGRESS_INTERVAL_SECONDS": (int, float),
    "TIMEOUT_SECONDS": (int, float, type(None)),
    "TRANSACTIONAL_TIMEOUT_SECONDS": (int, float),
    "CANCEL_GRACE_SECONDS": (int, float),
    "ASYNC_CONCURRENCY": (int,),
    "ASYNC_BLOCK_WARNING_SECONDS": (int, float),
    "POLL_INTERVAL_SECONDS": (int, float),
    "SLOW_CLAIM_SECONDS": (int, float, type(None)),
    "FULL_CLAIM_INTERVAL_SECONDS": (int, float),
    "NOTIFY": (bool,),
    "NOTIFY_PER_SECOND": (int, float, type(None)),
    "CLAIMERS_PER_NOTIFY": (int, type(None)),
    "LISTEN_DATABASE": (str, type(None)),
    "WAIT_POLL_MIN_SECONDS": (int, float),
    "WAIT_POLL_MAX_SECONDS": (int, float),
    "READ_DATABASE": (str, type(None)),
    "MAINTENANCE_INTERVAL_SECONDS": (int, float),
    "MAINTENANCE_BATCH_SIZE": (int,),
    "MAINTENANCE_STATEMENT_TIMEOUT_SECONDS": (int, float, type(None)),
    "PRUNE_INTERVAL_SECONDS": (int, float),
    "SCHEDULER_INTERVAL_SECONDS": (int, float),
    "KEEP_SUCCEEDED_SECONDS": (int, float, type(None)),
    "KEEP_FAILED_SECONDS": (int, float, type(None)),
    "AUTOSCALE_TARGET_WAIT_SECONDS": (int, float),
    "AUTOSCALE_COOLDOWN_SECONDS": (int, float),
    "AUTOSCALE_INTERVAL_SECONDS": (int, float),
    "MAX_PAYLOAD_BYTES": (int,),
    "MAX_TRACEBACK_CHARS": (int,),
    "TASK_MODULES": (list, tuple),
    "EMBEDDED_WORKER": (bool, dict),
    "VERSION": (str, type(None)),
}


_validated: "QueueSettings | None" = None


def get_settings() -> QueueSettings:
    """Return the current settings, validated; checked once, then kept until they change."""
    global _validated
    conf = _validated
    if conf is None:
        conf = _validated = _read_settings()
    return conf


@receiver(setting_changed)
def _forget_settings(*, setting, **kwargs):
    global _validated
    if setting == "SQLQUEUE":
        _validated = None


def _read_settings() -> QueueSettings:
    raw = getattr(django_settings, "SQLQUEUE", None) or {}
    if not isinstance(raw, dict):
        raise ImproperlyConfigured(
            f"settings.SQLQUEUE must be a dict, not {type(raw).__name__}."
        )
    known = {f.name for f in fields(QueueSettings)}
    unknown = sorted(set(raw) - known, key=str)
    if unknown:
        raise ImproperlyConfigured(
            "settings.SQLQUEUE has unknown key(s) "
            + ", ".join(_with_suggestion(key, known) for key in unknown)
            + f"; the valid keys are {', '.join(sorted(known))}."
        )
    for key, value in raw.items():
        wanted_types = _TYPES[key]
        if (isinstance(value, bool) and bool not in wanted_types) or not isinstance(
            value, wanted_types
        ):
            wanted = " or ".join(t.__name__ for t in wanted_types).replace("NoneType", "None")
            raise ImproperlyConfigured(
                f"settings.SQLQUEUE[{key!r}] must be {wanted}, not {type(value).__name__}."
            )
    conf = QueueSettings(**raw)
    _check_ranges(conf)
    return conf


def _with_suggestion(key, known) -> str:
    """``'MAX_ATTEMPT' (did you mean 'MAX_ATTEMPTS'?)``: a typo is the usual unknown key."""
    close = difflib.get_close_matches(str(key).upper(), known, n=1)
    return f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key)


def _check_ranges(conf: QueueSettings) -> None:
    problems = []
    for f in fields(conf):
        value = getattr(conf, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{f.name} must be a finite number, not {value!r}")
    if not QUEUE_NAME_RE.fullmatch(conf.DEFAULT_QUEUE):
        problems.append(
            f"DEFAULT_QUEUE {conf.DEFAULT_QUEUE!r} is not a valid queue name (1 to 100 of "
            "letters, digits, '_', '.', '-', starting with a letter or digit)"
        )
    if conf.MAX_ATTEMPTS < 1:
        problems.append("MAX_ATTEMPTS must be at least 1")
    if conf.MAX_INTERRUPTIONS < 1:
        problems.append("MAX_INTERRUPTIONS must be at least 1")
    for key in ("BACKOFF_SECONDS", "MIN_RETRY_DELAY_SECONDS", "MAX_RETRY_DELAY_SECONDS",
                "CANCEL_GRACE_SECONDS"):
        if getattr(conf, key) < 0:
            problems.append(f"{key} must not be negative")
    if not 0 <= conf.ASYNC_CONCURRENCY <= MAX_ASYNC_CONCURRENCY:
        problems.append(f"ASYNC_CONCURRENCY must be from 0 (async jobs on the threads) to "
                        f"{MAX_ASYNC_CONCURRENCY:,}")
    if conf.ASYNC_BLOCK_WARNING_SECONDS <= 0:
        problems.append("ASYNC_BLOCK_WARNING_SECONDS must be positive")
    if conf.WAIT_POLL_MIN_SECONDS > conf.WAIT_POLL_MAX_SECONDS:
        problems.append("WAIT_POLL_MIN_SECONDS must not exceed WAIT_POLL_MAX_SECONDS")
    if conf.MIN_RETRY_DELAY_SECONDS > conf.MAX_RETRY_DELAY_SECONDS:
        problems.append("MIN_RETRY_DELAY_SECONDS must not exceed MAX_RETRY_DELAY_SECONDS")
    if not 0 <= conf.RETRY_JITTER <= 1:
        problems.append("RETRY_JITTER must be a fraction from 0 to 1")
    for key in ("LEASE_SECONDS", "POLL_INTERVAL_SECONDS", "MAINTENANCE_INTERVAL_SECONDS",
                "PRUNE_INTERVAL_SECONDS", "SCHEDULER_INTERVAL_SECONDS",
                "FULL_CLAIM_INTERVAL_SECONDS", "AUTOSCALE_INTERVAL_SECONDS",
                "PROGRESS_INTERVAL_SECONDS", "TRANSACTIONAL_TIMEOUT_SECONDS",
                "WAIT_POLL_MIN_SECONDS", "WAIT_POLL_MAX_SECONDS", "UNKNOWN_TASK_DELAY_SECONDS",
                "UNKNOWN_TASK_MAX_SECONDS"):
        if getattr(conf, key) <= 0:
            problems.append(f"{key} must be positive")
    if not 1 <= conf.MAINTENANCE_BATCH_SIZE <= MAX_MAINTENANCE_BATCH_SIZE:
        problems.append(f"MAINTENANCE_BATCH_SIZE must be from 1 to {MAX_MAINTENANCE_BATCH_SIZE:,}")
    for key in ("TIMEOUT_SECONDS", "KEEP_SUCCEEDED_SECONDS", "KEEP_FAILED_SECONDS",
                "MAINTENANCE_STATEMENT_TIMEOUT_SECONDS"):
        if getattr(conf, key) is not None and getattr(conf, key) <= 0:
            problems.append(f"{key} must be positive or None")
    for key in ("AUTOSCALE_TARGET_WAIT_SECONDS", "AUTOSCALE_COOLDOWN_SECONDS"):
        if getattr(conf, key) < 0:
            problems.append(f"{key} must not be negative")
    if conf.SLOW_CLAIM_SECONDS is not None and conf.SLOW_CLAIM_SECONDS < 0:
        problems.append("SLOW_CLAIM_SECONDS must not be negative; None turns bounded claims off")
    if conf.NOTIFY_PER_SECOND is not None and conf.NOTIFY_PER_SECOND <= 0:
        problems.append("NOTIFY_PER_SECOND must be positive or None (no limit)")
    if conf.CLAIMERS_PER_NOTIFY is not None and conf.CLAIMERS_PER_NOTIFY < 1:
        problems.append("CLAIMERS_PER_NOTIFY must be at least 1, or None (every worker claims)")
    if conf.MAX_PAYLOAD_BYTES <= 0 or conf.MAX_TRACEBACK_CHARS <= 0:
        problems.append("MAX_PAYLOAD_BYTES and MAX_TRACEBACK_CHARS must be positive")
    if problems:
        raise ImproperlyConfigured("settings.SQLQUEUE: " + "; ".join(problems) + ".")


#: What to do when the package is used but its app is not installed: Django's own errors
#: (``LookupError: No installed app with label 'django_sqlqueue'``, ``RuntimeError: Model class
#: ... isn't in an application in INSTALLED_APPS``) do not say it.
NOT_INSTALLED = ("django_sqlqueue is not in INSTALLED_APPS: add 'django_sqlqueue' to "
                 "INSTALLED_APPS in your settings (it brings the job tables, their migrations "
                 "and the system checks), then run manage.py migrate.")


def require_installed(what: str) -> None:
    """Raise ImproperlyConfigured naming the fix once the installed apps are known and this app
    is not among them; ``what`` says what the project used (``@job shop.tasks.send``)."""
    from django.apps import apps

    if apps.apps_ready and not apps.is_installed("django_sqlqueue"):
        raise ImproperlyConfigured(f"{what}: {NOT_INSTALLED}")
