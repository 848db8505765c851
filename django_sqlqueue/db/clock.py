"""The database's clock: leases, heartbeats, claim times and schedules' ticks go by the
database's clock, never a host's (hosts' clocks disagree, and a claim may wait for a lock after
Python read the time). ``now_sql`` is "now" as SQL text (each driver says it its way),
``DatabaseNow`` the same as an ORM expression, ``database_now`` the clock read as a value."""

import datetime as dt

from django.db import connections
from django.db.models import DateTimeField, Func

from . import ops

UTC = dt.timezone.utc


def now_sql(connection, plus_seconds: bool = False, *, in_filter: bool = False) -> str:
    """The driver's ``now_sql`` (``db/base.py`` says what it is)."""
    return ops(connection).now_sql(plus_seconds, in_filter=in_filter)


class DatabaseNow(Func):
    """``now_sql`` as an ORM expression: ``.update(lease_expires_at=DatabaseNow(30))``, or in a
    filter, ``.filter(run_at__lte=DatabaseNow(in_filter=True))``."""

    output_field = DateTimeField()

    def __init__(self, plus_seconds: float | None = None, *, in_filter: bool = False):
        super().__init__()
        self.plus_seconds = plus_seconds
        self.in_filter = in_filter

    def as_sql(self, compiler, connection, **extra_context):
        if self.plus_seconds is None:
            return now_sql(connection, in_filter=self.in_filter), []
        return (now_sql(connection, plus_seconds=True, in_filter=self.in_filter),
                [float(self.plus_seconds)])


def database_now(alias: str) -> dt.datetime:
    """The database's clock, as an aware datetime (UTC)."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(ops(connection).read_clock(), [])
        value = cursor.fetchone()[0]
    if isinstance(value, str):  # SQLite: 'YYYY-MM-DD HH:MM:SS[.ffffff]', in UTC
        value = dt.datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
