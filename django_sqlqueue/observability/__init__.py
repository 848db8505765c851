"""What can be seen of the queue from outside, read from the database: ``queue_metrics.py`` (the
queue-level gauges read at each scrape), ``snapshot.py`` (what the queues look like now: the
dashboard and ``manage.py stats``), ``fleet.py`` and ``autoscale.py`` (the autoscaler's reading
and decision), ``replica.py`` (reading from a replica, and how current it is), ``throughput.py``
(jobs ended per minute, hour and day), ``liveness.py`` (whether a worker is alive) and
``durations.py`` (durations as short text). What a process sends out as things happen (metrics,
spans) is ``telemetry/``."""
