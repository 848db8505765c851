"""System checks (``manage.py check``): settings and database support."""

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router


@checks.register(checks.Tags.compatibility)
def check_settings(app_configs=None, **kwargs):
    from .conf import get_settings

    try:
        get_settings()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), hint="Fix settings.SQLQUEUE.", id="sqlqueue.E001")]
    return []


@checks.register(checks.Tags.database)
def check_database(app_configs=None, databases=None, **kwargs):
    """The jobs database must be one the claim query runs on: PostgreSQL (SKIP LOCKED and
    UPDATE ... RETURNING) or SQLite 3.35+ (RETURNING)."""
    from .models import Job

    alias = router.db_for_write(Job)
    if databases is None or alias not in databases:
        return []
    connection = connections[alias]
    if connection.vendor == "postgresql":
        return []
    if connection.vendor == "sqlite":
        import sqlite3

        if sqlite3.sqlite_version_info >= (3, 35):
            return []
        problem = f"SQLite {sqlite3.sqlite_version} lacks UPDATE ... RETURNING (3.35+)"
    else:
        problem = f"{connection.vendor} is not supported yet"
    return [
        checks.Error(
            f"the jobs database {alias!r} cannot run django-sqlqueue: {problem}.",
            hint="Keep the jobs table on PostgreSQL, or on SQLite 3.35 or newer.",
            id="sqlqueue.E002",
        )
    ]
