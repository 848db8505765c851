"""The database's clock, read as a value: leases, heartbeats, claim times and schedules' ticks
go by the database's clock, never a host's (hosts' clocks disagree). The SQL text of "now"
inside a statement is ``sql.now_sql`` (``DatabaseNow`` as an ORM expression)."""

import datetime as dt

from django.db import connections

from .. import sql

UTC = dt.timezone.utc


def database_now(alias: str) -> dt.datetime:
    """The database's clock, as an aware datetime (UTC)."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(sql.read_clock(connection), [])
        value = cursor.fetchone()[0]
    if isinstance(value, str):  # SQLite: 'YYYY-MM-DD HH:MM:SS[.ffffff]', in UTC
        value = dt.datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
