"""What a worker process says: its start banner, status lines in burst mode, and the tally of
its attempts' outcomes for the line it prints when it stops; as text, key=value or JSON
(``--log-format``, log_format.py). Memory use, for ``--max-memory``."""

import collections
import os
import sys
import threading

from django.db import connections

from .. import __version__
from ..db import ops
from . import log_format


class WorkerReporting:
    """Part of :class:`~django_sqlqueue.worker.process.WorkerProcess`: its own lines."""

    def _print_banner(self):
        connection = connections[self.alias]
        queues = ", ".join(self.config.queues) if self.config.queues else "all"
        self._say(
            f"django-sqlqueue {__version__} worker {self.worker_id}\n"
            f"  database: {ops(connection).name} (alias {self.alias!r})\n"
            f"  queues: {queues}\n"
            f"  concurrency: {self.config.concurrency} thread(s)"
            + (f", {self.config.async_concurrency} async on the event loop"
               if self.config.async_concurrency else "") +
            f"{' (supervised)' if self.config.supervised else ''}\n"
            f"  wake-up: {self.wakeup.mode}\n"
            f"  lease: {self.config.lease_seconds:g}s, heartbeat every "
            f"{self.config.heartbeat_interval:g}s\n"
            f"  schedules: {self._schedules_line()}"
            + ("\n  mode: burst (exit when nothing is left)" if self.config.burst else ""),
            "worker.started", worker=self.worker_id, version=__version__, pid=os.getpid(),
            database=ops(connection).name, alias=self.alias, queues=self.config.queues,
            concurrency=self.config.concurrency, supervised=self.config.supervised,
            async_concurrency=self.config.async_concurrency,
            wakeup=self.wakeup.mode, lease_seconds=self.config.lease_seconds,
            heartbeat_seconds=self.config.heartbeat_interval, burst=self.config.burst,
            scheduler=self.scheduler is not None,
        )

    def _schedules_line(self) -> str:
        if self.scheduler is None:
            return "not synced or ticked by this worker (--no-scheduler)"
        synced = self.schedules_synced
        declared = len(synced.created) + len(synced.updated) + synced.unchanged
        return (f"{declared} declared here (synced: {synced.summary()}); due ticks checked "
                f"every {self.config.scheduler_interval:g}s")

    def _say(self, text, event, *, level="info", **values):
        """Print one of this worker's own lines: ``text``, or with --log-format keyvalue/json
        the ``event`` and its ``values`` on one line (worker/log_format.py)."""
        if self.config.log_format != "text":
            text = log_format.line(self.config.log_format, event, level=level, **values)
        self.out.write(text if text.endswith("\n") else text + "\n")
        self.out.flush()


class OutcomeTally:
    """What this process's attempts came to, for the line it prints when it stops: jobs and
    attempts apart, since a retried job runs several attempts."""

    def __init__(self):
        self._counts = collections.Counter()
        self._lock = threading.Lock()

    def add(self, result) -> None:
        with self._lock:
            self._counts[result.outcome] += 1

    #: Every outcome the stop line counts (execution.RunResult.outcome), in its order.
    KINDS = ("succeeded", "exhausted", "cancelled", "failed", "rescheduled", "interrupted",
             "lost")

    def counts(self) -> dict:
        """``{"attempts": n, "succeeded": n, "exhausted": n, "cancelled": n, "failed": n,
        "rescheduled": n, "interrupted": n, "lost": n}``: every key, zero or not (the keys of the
        structured stop line)."""
        with self._lock:
            counts = dict(self._counts)
        return {"attempts": sum(counts.values()), **{k: counts.get(k, 0) for k in self.KINDS}}

    def summary(self) -> str:
        """``15 attempt(s): 10 job(s) finished (8 succeeded, 2 exhausted), 5 failed attempt(s)
        to retry``; the parts that are zero are left out (cancelled jobs count as finished)."""
        counts = self.counts()
        attempts = counts["attempts"]
        finished = {kind: counts[kind] for kind in ("succeeded", "exhausted", "cancelled")}
        parts = []
        if any(finished.values()):
            detail = ", ".join(f"{n} {kind}" for kind, n in finished.items() if n)
            parts.append(f"{sum(finished.values())} job(s) finished ({detail})")
        for kind, words in (("failed", "failed attempt(s) to retry"),
                            ("rescheduled", "rescheduled"),
                            ("interrupted", "interrupted by the database (run again)"),
                            ("lost", "outcome(s) lost with the lease")):
            if counts[kind]:
                parts.append(f"{counts[kind]} {words}")
        return f"{attempts} attempt(s)" + (": " + ", ".join(parts) if parts else "")


def resident_memory_mb() -> float:
    """Resident set size of this process, from /proc (Linux) or the peak from getrusage."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS, KiB elsewhere
        return peak / 2**20 if sys.platform == "darwin" else peak / 1024
