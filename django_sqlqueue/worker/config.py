"""The options of one worker, as ``runworker`` parses them, checked at the boundary."""

import os
import secrets
import socket
from dataclasses import dataclass, field

from django.conf import settings as django_settings

from ..conf import MAX_ASYNC_CONCURRENCY, get_settings
from ..enqueue.validation import queue_name
from ..telemetry import metrics
from .log_format import FORMATS

#: Job threads per process. Each thread that touches the ORM opens a database connection of
#: its own, and PostgreSQL allows 100 by default; past a few hundred, threads mostly wait on each
#: other (the GIL) and the database. More work at once takes more processes or hosts.
MAX_CONCURRENCY = 256
#: Transactional jobs per lane transaction: each holds its row locked until the batch commits,
#: and runs in a savepoint of it. PostgreSQL caches 64 subtransactions per session: past that,
#: while the transaction is open, every snapshot in the database must read pg_subtrans.
MAX_TRANSACTIONAL_BATCH = 64
#: Worker processes under one supervisor; more than this belongs on more hosts.
MAX_PROCESSES = 256


class InvalidWorkerOption(ValueError):
    """A worker option is out of range; the message names the option and the fix."""


@dataclass
class WorkerConfig:
    queues: list | None = None  # None: every queue
    concurrency: int = 8  # jobs run at once by this process (threads)
    # async jobs run at once on the process's event loop; None: SQLQUEUE["ASYNC_CONCURRENCY"]
    async_concurrency: int | None = None
    processes: int | None = None  # None: 1, or --autoscale's minimum to start with
    autoscale: str | None = None  # "MIN:MAX" processes under the supervisor (--autoscale)
    burst: bool = False  # exit once nothing is ready
    max_jobs: int | None = None  # recycle the process after this many jobs
    # Transactional jobs locked and run per transaction by the process's transactional lane
    # (worker/transactional_lane.py); 0: no lane, they are claimed as any job.
    transactional_batch: int = 0
    transactional_lanes: int = 1  # lanes (threads, each with its connection) per process
    max_memory_mb: float | None = None  # recycle once the resident memory passes this
    poll_interval: float | None = None  # default SQLQUEUE["POLL_INTERVAL_SECONDS"]
    shutdown_timeout: float = 30.0  # on SIGTERM, how long running jobs may finish
    name: str | None = None  # prefix of the worker's identity; default: the host name
    database: str | None = None  # alias of the jobs database; default: the router's
    supervised: bool = False  # a child of the supervisor (recycles by exiting)
    scheduler: bool = True  # sync and tick periodic schedules (--no-scheduler: False)
    metrics_port: int | None = None  # serve Prometheus metrics on this port (0: any free one)
    metrics_address: str = "0.0.0.0"  # the interface it listens on; "" is every one too
    log_format: str = "text"  # of every line the worker writes: text, keyvalue or json
    host: str = field(default_factory=socket.gethostname)

    def __post_init__(self):
        settings = get_settings()
        if self.poll_interval is None:
            self.poll_interval = settings.POLL_INTERVAL_SECONDS
        if self.async_concurrency is None:
            self.async_concurrency = settings.ASYNC_CONCURRENCY
        problems = []
        self.autoscale_range = None if self.supervised else self._autoscale_range(problems)
        if self.autoscale_range and self.processes is not None:
            problems.append("--autoscale sets the number of processes: leave out --processes")
        if self.autoscale_range and self.burst:
            problems.append("--autoscale cannot be combined with --burst (a drained process "
                            "would be started again); use --processes with --burst")
        if self.processes is None:
            self.processes = 1
        if self.queues is not None:
            try:
                self.queues = [queue_name(q) for q in self.queues]
            except ValueError as exc:
                problems.append(f"--queue: {exc}")
        for option, value, maximum in [
            ("--concurrency", self.concurrency, MAX_CONCURRENCY),
            ("--processes", self.processes, MAX_PROCESSES),
        ]:
            if not 1 <= value <= maximum:
                problems.append(f"{option} must be from 1 to {maximum}, not {value}")
        if self.concurrency > MAX_CONCURRENCY:
            problems.append(
                "for more jobs at once, run more processes (--processes) or hosts: every job "
                "thread may hold a database connection of its own"
            )
        if not 0 <= self.async_concurrency <= MAX_ASYNC_CONCURRENCY:
            problems.append(f"--async-concurrency must be from 0 (async jobs on the threads) to "
                            f"{MAX_ASYNC_CONCURRENCY}, not {self.async_concurrency}")
        if not 0 <= self.transactional_batch <= MAX_TRANSACTIONAL_BATCH:
            problems.append(f"--transactional-batch must be from 0 (no lane) to "
                            f"{MAX_TRANSACTIONAL_BATCH}, not {self.transactional_batch}")
        if not 1 <= self.transactional_lanes <= MAX_CONCURRENCY:
            problems.append(f"--transactional-lanes must be from 1 to {MAX_CONCURRENCY}, not "
                            f"{self.transactional_lanes}")
        if self.max_jobs is not None and self.max_jobs < 1:
            problems.append(f"--max-jobs must be at least 1, not {self.max_jobs}")
        for option, value in [
            ("--poll-interval", self.poll_interval),
            ("--max-memory", self.max_memory_mb),
        ]:
            if value is not None and value <= 0:
                problems.append(f"{option} must be more than 0, not {value}")
        if self.database is not None and self.database not in django_settings.DATABASES:
            problems.append(
                f"--database {self.database!r} is not in settings.DATABASES "
                f"(aliases: {', '.join(django_settings.DATABASES)})"
            )
        if self.metrics_port is not None:
            if not 0 <= self.metrics_port <= 65535:
                problems.append(f"--metrics-port must be from 0 to 65535, not {self.metrics_port}")
            elif not metrics.available():
                problems.append(f"--metrics-port needs prometheus_client: {metrics.EXTRA}")
        if self.log_format not in FORMATS:
            problems.append(f"--log-format must be one of {', '.join(FORMATS)}, not "
                            f"{self.log_format!r}")
        if self.shutdown_timeout < 0:
            problems.append(f"--shutdown-timeout must be 0 or more, not {self.shutdown_timeout}")
        if problems:
            raise InvalidWorkerOption("; ".join(p.rstrip(".") for p in problems) + ".")
        self.lease_seconds = settings.LEASE_SECONDS
        self.default_timeout = settings.TIMEOUT_SECONDS
        self.cancel_grace = settings.CANCEL_GRACE_SECONDS
        self.block_warning_seconds = settings.ASYNC_BLOCK_WARNING_SECONDS
        self.notify = settings.NOTIFY
        self.maintenance_interval = settings.MAINTENANCE_INTERVAL_SECONDS
        self.scheduler_interval = settings.SCHEDULER_INTERVAL_SECONDS
        self.keep_succeeded = settings.KEEP_SUCCEEDED_SECONDS
        self.keep_failed = settings.KEEP_FAILED_SECONDS

    def _autoscale_range(self, problems) -> tuple | None:
        """(MIN, MAX) of ``--autoscale MIN:MAX``, or None; a problem said in ``problems``."""
        if self.autoscale is None:
            return None
        text = str(self.autoscale).strip()
        low, colon, high = text.partition(":")
        try:
            minimum, maximum = int(low), int(high)
        except ValueError:
            minimum = maximum = None
        if not colon or minimum is None:
            problems.append(f"--autoscale takes MIN:MAX, two whole numbers of processes (for "
                            f"example --autoscale 1:4), not {text!r}")
        elif not 1 <= minimum <= maximum <= MAX_PROCESSES:
            problems.append(
                f"--autoscale {text}: MIN must be at least 1 (scaling to zero is a platform's "
                f"job, see docs/autoscaling.md) and at most MAX, and MAX at most "
                f"{MAX_PROCESSES}")
        else:
            return minimum, maximum
        return None

    @property
    def heartbeat_interval(self) -> float:
        return self.lease_seconds / 3

    def worker_id(self) -> str:
        """Unique per process: name (or host), pid, and a random suffix because containers
        reuse both host names and pids across restarts."""
        return f"{self.name or self.host}:{os.getpid()}:{secrets.token_hex(3)}"
