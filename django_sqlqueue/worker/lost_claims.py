"""Claims lost while the database was in trouble: found and dropped before a held job starts.

After a failover to an asynchronous standby, claims the old primary acknowledged can be gone:
their jobs are ready again, or already run by another worker on the new primary. Starting them
would run them twice at once. So once the database was in trouble (a connection broke, the gate
closed: ``resilience.py``), the first job thread (or the event loop) to start a job reads back
the claims of every held job not started yet, in one query (``claim.held.still_held``), and
withdraws those the database no longer gives to this worker: they are not this worker's to start
or release. One reading per trouble for the whole pool; the threads that saw it wait for it.
"""

import logging
import threading

from ..claim.held import still_held
from ..models import Job
from .log_format import fields
from .resilience import TRANSIENT, check_connections, drop_connection

logger = logging.getLogger("django_sqlqueue.worker.pool")  # the logger the docs name


class LostClaims:
    def __init__(self, pool):
        self.pool = pool
        # The gate's trouble count up to which the held claims were read back.
        self.checked_at = pool.gate.trouble
        self._checking = threading.Lock()

    def drop(self, trouble: int) -> list:
        """Read back the claims of the held jobs not started yet and withdraw those the database
        no longer gives to this worker; returns the jobs dropped. Once per ``trouble`` (the
        gate's count when the caller saw it): a caller that comes with a count already read back
        returns at once, after any reading under way. The database's errors propagate."""
        pool = self.pool
        with self._checking:
            if trouble <= self.checked_at:
                return []
            with pool._lock:
                waiting = [key for key, entry in pool._held.items() if entry.started_at is None]
            kept = (set(waiting) if pool.worker_id is None else
                    still_held(Job.objects.using(pool.alias), pool.worker_id, waiting))
            lost = []
            with pool._lock:
                for key in waiting:
                    entry = pool._held.get(key)
                    if key not in kept and entry is not None and entry.started_at is None:
                        pool._forget(entry)  # frees its slot, an async one included
                        lost.append(entry.job)
            self.checked_at = trouble
        for job in lost:
            logger.warning(
                "claim lost while the database was in trouble, job not started task=%s id=%s "
                "attempt=%s", job.task_name, job.pk, job.attempts,
                extra=fields("job.claim_lost", task=job.task_name, job_id=job.pk,
                             attempt=job.attempts))
        if lost:
            pool.on_slot_free()  # their slots are free: the fetcher may claim again
        return lost

    def after_trouble(self) -> int:
        """Before the caller's next job, once the database was in trouble: the calling thread's
        own connections checked, and the held claims read back (``drop``; the job in hand may be
        among those dropped, and starting it then finds it withdrawn). Returns the trouble count
        this covers. While the database does not answer, waits at the gate and tries again."""
        pool = self.pool
        while True:
            trouble = pool.gate.trouble
            check_connections()
            try:
                self.drop(trouble)
                return trouble
            except TRANSIENT:
                drop_connection(pool.alias)
                pool.gate.close("reading back the held claims failed")
                if not pool.gate.wait(pool.stopped.is_set):
                    # Shutting down with the database gone: the job in hand runs unchecked, as
                    # any did before this reading (its first query fails: an interruption).
                    return trouble
            except Exception:  # never lose a thread to the reading: the job runs unchecked
                logger.exception("reading back the held claims failed")
                return trouble
