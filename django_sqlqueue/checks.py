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
    """The jobs database must be SQLite or have SELECT ... FOR UPDATE SKIP LOCKED."""
    from .models import Job

    alias = router.db_for_write(Job)
    if databases is None or alias not in databases:
        return []
    connection = connections[alias]
    if connection.vendor == "sqlite" or connection.features.has_select_for_update_skip_locked:
        return []
    return [
        checks.Error(
            f"the jobs database {alias!r} ({connection.vendor}) does not support "
            "SELECT ... FOR UPDATE SKIP LOCKED, which claiming jobs relies on.",
            hint="Use PostgreSQL, MySQL 8+, MariaDB 10.6+ or SQLite for the jobs table.",
            id="sqlqueue.E002",
        )
    ]
