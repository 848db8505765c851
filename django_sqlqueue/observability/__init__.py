"""What can be seen of the queue from outside: ``metrics.py`` (what workers count for
Prometheus), ``queue_metrics.py`` (the queue-level gauges read at each scrape), ``tracing.py``
(OpenTelemetry spans), ``snapshot.py`` (what the queues look like now: the dashboard and
``manage.py stats``), ``replica.py`` (reading from a replica, and how current it is),
``throughput.py`` (jobs ended per minute, hour and day), ``liveness.py``
(whether a worker is alive) and ``durations.py`` (durations as short text)."""
