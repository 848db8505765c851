"""A running job's progress: ``report_progress(done, total, message)`` as often as the job likes,
at most one write per job every ``PROGRESS_INTERVAL_SECONDS``.

A report only keeps the latest value in memory (``board``, one per process) and returns: no
query, a lock and a dict. The worker's progress thread (``worker/process.py``) calls
``board.flush()`` every ``PROGRESS_INTERVAL_SECONDS``: one UPDATE for every job whose value
changed since the last flush, each row fenced by its claim token (a worker that lost a job
cannot overwrite its new owner's progress). The runner writes a job's last unwritten value when
its function returns (``flush_job``), before the outcome is written: the final value is never
lost, and ``run_job()`` by hand writes it too. So a job that reports 10,000 times a second costs
the database ``1 / PROGRESS_INTERVAL_SECONDS`` writes a second, and a job that never reports
costs nothing: the flush of an empty board runs no query.
"""

import logging
import threading
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError
from django.db.models import Case, Q, Value, When

from ..context import current_job
from ..db.clock import DatabaseNow
from ..db.job_table import MAX_PROGRESS_MESSAGE_CHARS, PROGRESS_COLUMNS

logger = logging.getLogger(__name__)

#: The job's columns that hold it; a claim does not read them back (claim/plain.py).
COLUMNS = PROGRESS_COLUMNS
#: The longest message a report may carry (the column's length).
MAX_MESSAGE_CHARS = MAX_PROGRESS_MESSAGE_CHARS


@dataclass(frozen=True)
class Progress:
    """A job's latest reported progress, as ``Job.progress`` reads it."""

    done: int
    total: int | None = None
    message: str = ""
    at: datetime | None = None  # when it was written, by the database's clock

    @property
    def fraction(self) -> float | None:
        """``done / total`` from 0 to 1; None without a total. A total of 0 is complete."""
        if self.total is None:
            return None
        return 1.0 if self.total == 0 else min(self.done / self.total, 1.0)

    @property
    def percent(self) -> int | None:
        """The fraction as a whole percentage, rounded down (so 100 only at the end)."""
        fraction = self.fraction
        return None if fraction is None else int(fraction * 100)

    @property
    def amount(self) -> str:
        """"3,000 of 4,000 (75%)", or "12 done" without a total: as the admin and stats say it."""
        if self.total is None:
            return f"{self.done:,} done"
        return f"{self.done:,} of {self.total:,} ({self.percent}%)"

    def as_dict(self) -> dict:
        """JSON-ready: what ``stats --json`` and the event stream send."""
        return {"done": self.done, "total": self.total, "fraction": self.fraction,
                "percent": self.percent, "message": self.message,
                "at": self.at.isoformat() if self.at else None}


def validate(done, total, message) -> None:
    """Raise ``TypeError``/``ValueError`` naming the fix for a report that cannot be stored."""
    for name, value in (("done", done), ("total", total)):
        if value is None and name == "total":
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"report_progress(): {name} must be an int, got "
                            f"{type(value).__name__} {value!r}; round it (int(...)) first")
        if value < 0:
            raise ValueError(f"report_progress(): {name} must not be negative, got {value}")
    if total is not None and done > total:
        raise ValueError(f"report_progress(): done ({done}) is more than total ({total}); "
                         "pass the larger total, or total=None when it is not known")
    if not isinstance(message, str):
        raise TypeError(f"report_progress(): message must be a str, got "
                        f"{type(message).__name__}")
    if len(message) > MAX_MESSAGE_CHARS:
        raise ValueError(f"report_progress(): message is {len(message)} characters; at most "
                         f"{MAX_MESSAGE_CHARS} are kept: shorten it (message[:"
                         f"{MAX_MESSAGE_CHARS}])")


@dataclass
class _Pending:
    """One job's value not yet written: the row's model, alias, key and fence, and the value."""

    model: type
    alias: str
    pk: int
    claim_token: object
    done: int
    total: int | None
    message: str


class ProgressBoard:
    """The latest unwritten progress of each job of this process, and its writes."""

    def __init__(self):
        self._pending: dict = {}  # (alias, pk) -> _Pending
        self._lock = threading.Lock()  # guards _pending
        self._writing = threading.Lock()  # one write at a time: a final value is written last
        self.statements = 0  # UPDATEs run, for tests and the curious

    def report(self, job, done: int, total: int | None, message: str) -> None:
        key = (job._state.db, job.pk)
        entry = _Pending(type(job), job._state.db or "default", job.pk, job.claim_token,
                         done, total, message)
        with self._lock:
            self._pending[key] = entry

    def has_pending(self, job) -> bool:
        return (job._state.db, job.pk) in self._pending

    def flush(self) -> int:
        """Write every job's latest unwritten value: one UPDATE per database (usually one), none
        when nothing changed. Returns how many rows were written."""
        with self._writing:
            with self._lock:
                taken, self._pending = self._pending, {}
            by_alias: dict = {}
            for entry in taken.values():
                by_alias.setdefault((entry.model, entry.alias), []).append(entry)
            try:
                return sum(self._write(model, alias, entries)
                           for (model, alias), entries in by_alias.items())
            except DatabaseError:
                with self._lock:  # written again at the next flush, unless reported since
                    for key, entry in taken.items():
                        self._pending.setdefault(key, entry)
                raise

    def flush_job(self, job) -> int:
        """Write ``job``'s unwritten value now, if it has one (its function has returned)."""
        if not self.has_pending(job):
            return 0
        with self._writing:
            with self._lock:
                entry = self._pending.pop((job._state.db, job.pk), None)
            return self._write(entry.model, entry.alias, [entry]) if entry else 0

    def discard(self) -> None:
        """Forget every unwritten value (tests)."""
        with self._lock:
            self._pending.clear()

    def _write(self, model, alias, entries) -> int:
        fence = Q()
        for entry in entries:
            fence |= Q(pk=entry.pk, claim_token=entry.claim_token)

        def each(field):
            if len(entries) == 1:
                return getattr(entries[0], field)
            column = model._meta.get_field(f"progress_{field}")
            return Case(*(When(pk=entry.pk, then=Value(getattr(entry, field), column))
                          for entry in entries), default=None, output_field=column)

        self.statements += 1
        return model._default_manager.using(alias).filter(fence).update(
            progress_done=each("done"), progress_total=each("total"),
            progress_message=each("message"), progress_at=DatabaseNow(),
        )


#: This process's board: the worker's progress thread flushes it.
board = ProgressBoard()


def report_progress(done: int, total: int | None = None, message: str = "") -> bool:
    """Report the running job's progress: ``done`` of ``total`` units (None: not known) and a
    short ``message``. Returns at once, having written nothing: the latest value is written
    within ``PROGRESS_INTERVAL_SECONDS`` by the worker, and when the job's function returns.
    Outside a job (no ``current_job()``) it does nothing and returns False, so code shared with
    a management command or a view may call it."""
    validate(done, total, message)
    job = current_job()
    if job is None:
        return False
    board.report(job, done, total, message)
    return True


def write_final(job) -> None:
    """Write ``job``'s last unwritten progress (the runner, when its function has returned).
    A database error is logged, not raised: the outcome that follows matters more, and its
    write meets the same error and handles it."""
    try:
        board.flush_job(job)
    except DatabaseError as error:
        logger.warning("could not write the progress of job %s: %s", job.pk, error)
