"""Where a worker LISTENs for the enqueue NOTIFY: a connection of its own, which must reach
PostgreSQL itself.

A transaction-pooling PgBouncer hands each transaction to any server connection, so a LISTEN
through it is forgotten when its transaction ends. Behind one (Django's marker: the jobs
database has ``DISABLE_SERVER_SIDE_CURSORS``, which Django's docs require there), workers LISTEN
on ``SQLQUEUE["LISTEN_DATABASE"]`` (an alias of ``DATABASES`` or a libpq connection string that
goes around the pooler), or, without one, rely on polling alone. Enqueues still send NOTIFY
through the pooler: NOTIFY, unlike LISTEN, works in any pooling mode.
"""

from django.db import connections

from ..conf import get_settings

# Keys of a Django PostgreSQL OPTIONS dict that are Django's, not libpq connection parameters.
_DJANGO_ONLY_OPTIONS = {"isolation_level", "server_side_binding", "pool", "assume_role"}


def behind_pooler(alias: str) -> bool:
    """Whether ``alias`` is marked as reached through a transaction pooler."""
    return bool(connections[alias].settings_dict.get("DISABLE_SERVER_SIDE_CURSORS"))


def is_alias(target: str) -> bool:
    """A LISTEN_DATABASE that is not a connection string (``host=...``, ``postgresql://...``)
    names an alias."""
    return "=" not in target and "://" not in target


def listen_params(alias: str) -> dict | None:
    """``psycopg.connect()`` arguments of the LISTEN connection for workers of the jobs database
    ``alias``, or None when they must poll (behind a pooler with no LISTEN_DATABASE)."""
    target = get_settings().LISTEN_DATABASE
    if target is None:
        return None if behind_pooler(alias) else alias_params(alias)
    if is_alias(target):
        return alias_params(target)
    return {"conninfo": target}


def polling_reason(alias: str) -> str:
    return (f"the database {alias!r} has DISABLE_SERVER_SIDE_CURSORS (a transaction pooler, "
            "where LISTEN does not work) and SQLQUEUE['LISTEN_DATABASE'] is not set")


def alias_params(alias: str) -> dict:
    settings = connections[alias].settings_dict
    params = {
        "dbname": settings.get("NAME") or "postgres",
        "user": settings.get("USER") or None,
        "password": settings.get("PASSWORD") or None,
        "host": settings.get("HOST") or None,
        "port": settings.get("PORT") or None,
    }
    for key, value in (settings.get("OPTIONS") or {}).items():
        if key not in _DJANGO_ONLY_OPTIONS:
            params[key] = value
    return {k: v for k, v in params.items() if v is not None}
