"""What the worker (and any process that enqueues) counts for Prometheus, with prometheus_client.

prometheus_client is optional (``pip install 'django-sqlqueue[prometheus]'``). Without it every
function here does nothing; with it, the metric objects are made at the first event, in the
process that records it. Made late on purpose: ``runworker --metrics-port`` with ``--processes``
first switches prometheus_client to its multiprocess mode (worker/metrics_export.py), and a
metric made before that would count in this process's memory only, where the supervisor
serving the endpoint cannot read it.

Names follow Prometheus's conventions (a ``sqlqueue_`` prefix, the unit in the name, ``_total``
on counters, which prometheus_client appends). Labels are the queue and the task name, both
bounded by the code (registered tasks, queue names in settings), never a job's id or arguments.
The queue-level gauges read from the database (depth, lag, live workers) are queue_metrics.py's.
"""

import collections
import importlib.util
import threading

from ..exceptions import PrometheusClientMissing

#: What to install for metrics, named in every error about it.
EXTRA = "pip install 'django-sqlqueue[prometheus]'"

#: Run time of an attempt, seconds: from a few milliseconds to an hour.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900,
                    3600)
#: From when a job became due (its run_at) to its claim, seconds.
PICKUP_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)

_lock = threading.Lock()
_metrics = None  # _Metrics once made; False when prometheus_client is not installed


def available() -> bool:
    """Whether prometheus_client can be imported here (found, without importing it)."""
    try:
        return importlib.util.find_spec("prometheus_client") is not None
    except ImportError:  # an import hook that refuses it
        return False


def require(what: str) -> None:
    """Raise PrometheusClientMissing, naming ``what`` needed it and the extra to install."""
    if not available():
        raise PrometheusClientMissing(f"{what} needs prometheus_client: {EXTRA}")


class _Metrics:
    def __init__(self, prometheus_client):
        counter, gauge, histogram = (prometheus_client.Counter, prometheus_client.Gauge,
                                     prometheus_client.Histogram)
        by_task = ("queue", "task")
        self.enqueued = counter("sqlqueue_jobs_enqueued", "Jobs enqueued by this process "
                                "(committed).", by_task)
        self.started = counter("sqlqueue_jobs_started", "Attempts started.", by_task)
        self.finished = counter(
            "sqlqueue_jobs_finished", "Attempts finished, by outcome: succeeded, failed (runs "
            "again), exhausted, rescheduled, interrupted (its database went away: runs again, "
            "the attempt not counted), lost (its lease was lost meanwhile).",
            (*by_task, "outcome"))
        self.retried = counter("sqlqueue_jobs_retried", "Failed attempts whose job runs again.",
                               by_task)
        self.rescued = counter("sqlqueue_jobs_rescued", "Running jobs interrupted by the loss "
                               "of their worker (lease ran out, worker dead) and given back, "
                               "by this process's maintenance.")
        self.duration = histogram("sqlqueue_jobs_run_duration_seconds", "Run time of attempts.",
                                  by_task, buckets=DURATION_BUCKETS)
        self.pickup = histogram(
            "sqlqueue_jobs_pickup_latency_seconds", "From when a job was due (run_at) to its "
            "claim, by the database's clock.", by_task, buckets=PICKUP_BUCKETS)
        # "livesum": in multiprocess mode, the sum over the processes alive now; the supervisor
        # drops a process's figures when it exits (worker/metrics_export.py).
        self.processes = gauge("sqlqueue_worker_processes", "Live worker processes.",
                               multiprocess_mode="livesum")
        self.slots = gauge("sqlqueue_worker_slots", "Job threads of the live worker processes.",
                           multiprocess_mode="livesum")
        self.busy = gauge("sqlqueue_worker_busy_slots", "Job threads running a job now.",
                          ("queue",), multiprocess_mode="livesum")
        self._of_task: dict = {}

    def of_task(self, queue: str, task: str) -> "_TaskMetrics":
        """The labelled children of one queue and task, looked up once: ``labels()`` costs
        about a microsecond each, and a job records seven."""
        try:
            return self._of_task[queue, task]
        except KeyError:
            return self._of_task.setdefault((queue, task), _TaskMetrics(self, queue, task))


class _TaskMetrics:
    def __init__(self, metrics: _Metrics, queue: str, task: str):
        self.started = metrics.started.labels(queue, task)
        self.retried = metrics.retried.labels(queue, task)
        self.duration = metrics.duration.labels(queue, task)
        self.pickup = metrics.pickup.labels(queue, task)
        self.busy = metrics.busy.labels(queue)
        self._finished = metrics.finished
        self._queue, self._task = queue, task
        self._by_outcome: dict = {}

    def finished(self, outcome: str):
        try:
            return self._by_outcome[outcome]
        except KeyError:
            child = self._finished.labels(self._queue, self._task, outcome)
            return self._by_outcome.setdefault(outcome, child)


def recording() -> bool:
    """Whether events are counted here (prometheus_client is installed)."""
    return _get() is not None


def _get():
    global _metrics
    if _metrics is None:
        with _lock:
            if _metrics is None:
                try:
                    import prometheus_client
                except ImportError:
                    _metrics = False
                else:
                    _metrics = _Metrics(prometheus_client)
    return _metrics or None


def jobs_enqueued(jobs) -> None:
    """Count inserted jobs; the caller calls this once their transaction has committed."""
    metrics = _get()
    if metrics is None:
        return
    for (queue, task), n in collections.Counter((j.queue, j.task_name) for j in jobs).items():
        metrics.enqueued.labels(queue, task).inc(n)


def job_started(job) -> None:
    """A job thread starts running ``job`` (call :func:`job_ran` when it returns)."""
    metrics = _get()
    if metrics is None:
        return
    task = metrics.of_task(job.queue, job.task_name)
    task.started.inc()
    task.busy.inc()
    if job.claimed_at is not None and job.run_at is not None:
        # Both from the database's clock: no skew between hosts.
        task.pickup.observe(max((job.claimed_at - job.run_at).total_seconds(), 0.0))


def job_ran(job) -> None:
    """The job thread is done with ``job`` (its outcome may not be written yet)."""
    metrics = _get()
    if metrics is not None:
        metrics.of_task(job.queue, job.task_name).busy.dec()


def job_finished(job, outcome: str, duration_seconds: float) -> None:
    """An attempt's outcome was written (or lost): ``outcome`` as execution.RunResult has it."""
    metrics = _get()
    if metrics is None:
        return
    task = metrics.of_task(job.queue, job.task_name)
    task.finished(outcome).inc()
    task.duration.observe(duration_seconds)
    if outcome == "failed":
        task.retried.inc()


def jobs_rescued(count: int) -> None:
    metrics = _get()
    if metrics is not None and count:
        metrics.rescued.inc(count)


def worker_started(concurrency: int) -> None:
    """This process is a live worker with ``concurrency`` job threads."""
    metrics = _get()
    if metrics is not None:
        metrics.processes.set(1)
        metrics.slots.set(concurrency)


def worker_stopped() -> None:
    metrics = _get()
    if metrics is not None:
        metrics.processes.set(0)
        metrics.slots.set(0)
