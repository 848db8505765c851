"""What a process sends out as things happen, to whatever watches it: ``metrics.py`` (what workers
and enqueues count for Prometheus) and ``tracing.py`` (OpenTelemetry spans of enqueues and runs).
Neither reads the database; what is read from it to be seen is ``observability/``."""
