"""Views of any Django process: the Prometheus endpoint (the queue-level gauges read from the
database, queue_metrics.py; docs/observability.md), the health probes (worker/health.py;
docs/operations.md) and a job's progress as server-sent events
(``job_events``, ``stream_job_events``; docs/progress.md). Include ``django_sqlqueue.urls``."""

import json
import time

from django.core.exceptions import PermissionDenied
from django.db import router
from django.http import Http404, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from .embedded import thread as embedded
from .models import Job
from .observability.queue_metrics import QueueMetricsCollector
from .observability.replica import read_alias
from .run.progress import COLUMNS
from .statuses import FINISHED_STATUSES
from .telemetry import metrics as worker_metrics
from .worker import health

#: What the event stream reads of the job, each poll.
_READ = ("id", "status", *COLUMNS)


@require_GET
def metrics(request):
    """The gauges in Prometheus's text format (OpenMetrics if the scraper asks for it)."""
    worker_metrics.require("the django_sqlqueue metrics view")
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import choose_encoder

    registry = CollectorRegistry(auto_describe=False)
    # SQLQUEUE["READ_DATABASE"] (a replica), else where the routers send reads of Job.
    registry.register(QueueMetricsCollector(read_alias(router.db_for_read(Job))))
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encode(registry), content_type=content_type)


@never_cache
@require_GET
def health_live(request):
    """A liveness probe: 200 while the embedded worker of this process (if one runs here), else
    every worker of this host, beats within its lease (also while the database does not answer:
    a restart would not help); 503 otherwise. Asks for no login: probes have none."""
    worker = embedded.current()
    alias = worker.process.alias if worker else router.db_for_write(Job)
    report = health.liveness(alias, names=[worker.worker_id] if worker else None)
    return _health_response(report)


@never_cache
@require_GET
def health_ready(request):
    """A readiness probe: 200 once the jobs database answers and is migrated, and with
    SQLQUEUE["VERSION"] set, the embedded worker of this process (if one runs here) runs it;
    503 otherwise."""
    worker = embedded.current()
    if worker is None:
        return _health_response(health.readiness(router.db_for_write(Job), names=[]))
    return _health_response(health.readiness(worker.process.alias, names=[worker.worker_id]))


def _health_response(report) -> JsonResponse:
    status = 503 if report.status == health.UNHEALTHY else 200
    return JsonResponse(report.as_dict(), status=status)


@require_GET
def job_events(request, job_id):
    """A job's progress and final state as server-sent events, for staff who may view jobs
    (``django_sqlqueue.view_job``), with its result. Anyone else gets 403: a view of your own
    makes its own check and returns ``stream_job_events(job_id)``."""
    user = request.user
    if not (user.is_active and user.is_staff and user.has_perm("django_sqlqueue.view_job")):
        raise PermissionDenied("viewing jobs needs the django_sqlqueue.view_job permission")
    return stream_job_events(job_id, include_result=True)


def stream_job_events(job_id, *, using=None, include_result=False, poll_seconds=0.5,
                      max_seconds=300.0, keepalive_seconds=15.0, sleep=time.sleep,
                      clock=time.monotonic) -> StreamingHttpResponse:
    """A ``text/event-stream`` response that follows job ``job_id``: a ``progress`` event when
    its status or progress changes (read from its row every ``poll_seconds``), then one
    ``finished`` event with its final status (and its result with ``include_result``), and the
    stream ends. After ``max_seconds`` the stream ends without it; a browser's ``EventSource``
    then connects again and follows on. Checks no permission: call it after your own check.
    Raises ``Http404`` if there is no such job.

    Under WSGI the response holds one of the server's threads (and a database connection) for
    as long as it streams: count them in your server's threads, or lower ``max_seconds``."""
    alias = using or router.db_for_read(Job)
    if not Job.objects.using(alias).filter(pk=job_id).exists():
        raise Http404(f"no job {job_id}")
    events = _follow(Job.objects.using(alias).filter(pk=job_id), job_id,
                     include_result=include_result, poll_seconds=poll_seconds,
                     max_seconds=max_seconds, keepalive_seconds=keepalive_seconds, sleep=sleep,
                     clock=clock)
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: send each event as it comes
    return response


def _follow(rows, job_id, *, include_result, poll_seconds, max_seconds, keepalive_seconds, sleep,
            clock):
    started = last_sent = clock()
    yield f"retry: {int(max(poll_seconds, 1) * 1000)}\n\n"  # how soon a browser reconnects
    sent = None
    while True:
        row = rows.values(*_READ).first()
        if row is None:  # deleted (pruned) while followed
            yield _event("finished", {"id": job_id, "status": None, "progress": None})
            return
        state = _state(rows.model(**row))
        if state != sent:
            yield _event("progress", state)
            sent, last_sent = state, clock()
        if row["status"] in FINISHED_STATUSES:
            if include_result:
                state["result"] = rows.values_list("result", flat=True).first()
            yield _event("finished", state)
            return
        if clock() - started >= max_seconds:
            return
        if clock() - last_sent >= keepalive_seconds:
            yield ": keep-alive\n\n"  # a comment: proxies see traffic, browsers ignore it
            last_sent = clock()
        sleep(poll_seconds)


def _state(job) -> dict:
    progress = job.progress
    return {"id": job.pk, "status": job.status,
            "progress": progress.as_dict() if progress else None}


def _event(name: str, data: dict) -> str:
    return f"event: {name}\ndata: {json.dumps(data, default=str)}\n\n"
