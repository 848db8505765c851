"""``manage.py stats`` as text: one line per queue, aligned, for a terminal or a log."""

from django.utils import timezone

from ..observability.durations import seconds_text
from ..observability.snapshot import EXACT_LIMIT
from ..statuses import JobStatus

#: (heading, what it shows) per column, in order.
COLUMNS = (
    ("QUEUE", "the queue's name"),
    ("QUEUED", "queued and due now"),
    ("SCHEDULED", "queued with a future run_at"),
    ("WAITING", "a workflow's job waiting for its parents"),
    ("RUNNING", "claimed by a worker"),
    ("RETRYING", "an attempt failed; waiting for the next"),
    ("EXHAUSTED", "failed for good (in the table now)"),
    ("LAG", "how long the oldest due job has waited past its run_at"),
    ("DONE/MIN", "jobs that ended succeeded or exhausted per minute, last 5 minutes and "
                 "this one so far"),
    ("1H", "jobs that ended succeeded or exhausted in the last hour"),
    ("FAILED 1H", "jobs that ended exhausted in the last hour"),
    ("WORKERS", "live workers taking the queue"),
)
RATE_MINUTES = 5


def lines(snap) -> list[str]:
    """The heading line, the table, and notes on what needs attention."""
    live = snap.live_workers
    silent = len(snap.workers) - len(live)
    head = (f"{snap.taken_at:%Y-%m-%d %H:%M:%S %Z}  {len(live)} live worker"
            f"{'' if len(live) == 1 else 's'}"
            + (f", {silent} silent" if silent else "")
            + f", {sum(w.concurrency for w in live)} slots")
    rows = [[heading for heading, _ in COLUMNS]]
    for queue in snap.queues:
        hour = queue.throughput["1h"]

        def count(state, counts=queue.counts):
            return ("~" if state in snap.estimated else "") + str(counts[state])

        lag = "-" if queue.lag_seconds is None else seconds_text(queue.lag_seconds, coarse=True)
        if queue.lag_seconds is not None and "queued" in snap.estimated:
            lag = f">{lag}"
        rows.append([
            queue.name, count("queued"), count("scheduled"), count("waiting"), count("running"),
            count("failed"),
            count("exhausted"), lag + (" !" if queue.unserved else ""),
            f"{queue.per_minute_rate(RATE_MINUTES, snap.current_minute_seconds):.1f}",
            str(hour["succeeded"] + hour["exhausted"]), str(hour["exhausted"]),
            str(queue.live_workers),
        ])
    table = _aligned(rows)
    notes = [f"! queue {q.name}: jobs are due and no live worker takes it"
             for q in snap.queues if q.unserved]
    if not snap.queues:
        notes.append("no jobs")
    if snap.estimated:
        notes.append("~ estimated from a sample of the table (counted exactly up to "
                     f"{EXACT_LIMIT:,} jobs)" + ("; > the lag is at least this" if "queued" in
                                                  snap.estimated else ""))
    if snap.replica is not None:
        head += f"\nread from {snap.database!r}, {snap.replica.text()}"
    return [head, *table, *notes]


def tagged_lines(tags, stats: dict) -> list[str]:
    """``stats --tag``: the jobs with every one of ``tags``, per queue, by status, and lag;
    ``stats`` is ``JobQuerySet.stats()`` of them."""
    rows = [["QUEUE", *(status.upper() for status in JobStatus.values), "LAG"]]
    for queue, queue_stats in stats.items():
        lag = queue_stats.lag_seconds
        rows.append([queue, *(str(queue_stats.counts.get(status, 0))
                              for status in JobStatus.values),
                     "-" if lag is None else seconds_text(lag, coarse=True)])
    return [f"jobs tagged {', '.join(tags)}", *_aligned(rows), *([] if stats else ["no jobs"])]


def _aligned(rows) -> list[str]:
    """``rows`` of cells as lines: the first column left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                      for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()
            for row in rows]


def tagged_json(tags, stats: dict) -> dict:
    """``stats --tag --json``: ``{"tags": [...], "queues": {queue: {"counts": {status: n},
    "lag_seconds": s or null}}}``."""
    return {"tags": list(tags), "queues": {
        queue: {"counts": {status: queue_stats.counts.get(status, 0)
                           for status in JobStatus.values},
                "lag_seconds": queue_stats.lag_seconds}
        for queue, queue_stats in stats.items()}}


def job_line(job, now=None) -> str:
    """One job for ``stats --job``: "job 42 shop.tasks.report running: 3,000 of 10,000 (30%),
    'rows', 2 s ago"."""
    head = f"job {job.pk} {job.task_name} {job.status}"
    progress = job.progress
    if progress is None:
        return f"{head}: no progress reported"
    message = f", {progress.message!r}" if progress.message else ""
    age = ((now or timezone.now()) - progress.at).total_seconds()
    return f"{head}: {progress.amount}{message}, {seconds_text(max(age, 0))} ago"


def job_json(job) -> dict:
    """One job for ``stats --job --json``: id, task, status and progress (or null)."""
    progress = job.progress
    return {"id": job.pk, "task": job.task_name, "status": job.status,
            "progress": progress.as_dict() if progress else None}
