"""The Prometheus endpoint of any Django process: the queue-level gauges read from the database
(queue_metrics.py). Include ``django_sqlqueue.urls``; docs/observability.md shows how."""

from django.db import router
from django.http import HttpResponse
from django.views.decorators.http import require_GET

from .models import Job
from .observability import metrics as worker_metrics
from .observability.queue_metrics import QueueMetricsCollector
from .observability.replica import read_alias


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
