"""Waiting for jobs to finish (docs/waiting.md): ``waiter.py`` blocks or awaits until every
job of a list has a final status, with a timeout; ``listener.py`` is the one LISTEN connection
per process that wakes waiters on PostgreSQL."""
