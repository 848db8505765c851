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
        # One line that names the key and what to change: the message says both.
        return [checks.Error(str(exc), id="sqlqueue.E001")]
    return []


def database_problem(alias: str) -> str | None:
    """Why the database ``alias`` cannot hold the jobs table, or None if it can.

    The claim is one UPDATE ... RETURNING (with FOR UPDATE SKIP LOCKED on PostgreSQL).
    """
    connection = connections[alias]
    if connection.vendor == "postgresql":
        return None
    if connection.vendor == "sqlite":
        import sqlite3

        if sqlite3.sqlite_version_info >= (3, 35):
            return None
        return f"SQLite {sqlite3.sqlite_version} lacks UPDATE ... RETURNING (3.35+)"
    return f"{connection.vendor} is not supported yet"


DATABASE_HINT = "Keep the jobs table on PostgreSQL, or on SQLite 3.35 or newer."


@checks.register(checks.Tags.database)
def check_database(app_configs=None, databases=None, **kwargs):
    """The jobs database must be one the claim query runs on."""
    from .models import Job

    alias = router.db_for_write(Job)
    if databases is None or alias not in databases:
        return []
    problem = database_problem(alias)
    if problem is None:
        return []
    return [
        checks.Error(
            f"the jobs database {alias!r} cannot run django-sqlqueue: {problem}.",
            hint=DATABASE_HINT,
            id="sqlqueue.E002",
        )
    ]
