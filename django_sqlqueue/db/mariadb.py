"""MariaDB 10.6+ (Django's vendor ``"mysql"``; MySQL itself is refused by the system check):
no partial indexes and no ``UPDATE ... RETURNING`` (its statements are sql_mariadb.py's), new
jobs read from a JSON document by ``JSON_TABLE``."""

import functools

from .base import NOT_PLAIN, DatabaseDriver

#: The type a per-job value of each field type is read as from MariaDB's ``JSON_TABLE``: wide
#: enough that a value reaches the column whole (an over-long one must fail at the column, not be
#: cut), and exact (a FloatField read as an integer would round). Other types (BooleanField,
#: UUIDField) are not put in MariaDB's document: their jobs go through bulk_create.
DOCUMENT_TYPES = {
    "JSONField": "JSON", "DateTimeField": "DATETIME(6)", "CharField": "LONGTEXT",
    "TextField": "LONGTEXT", "FloatField": "DOUBLE", "IntegerField": "BIGINT",
    "SmallIntegerField": "BIGINT", "BigIntegerField": "BIGINT", "PositiveIntegerField": "BIGINT",
    "PositiveSmallIntegerField": "BIGINT", "PositiveBigIntegerField": "BIGINT UNSIGNED",
}


class MariaDBDriver(DatabaseDriver):
    vendor = "mysql"
    inserts_from_document = True

    def problem(self) -> str | None:
        return server_problem(self.connection)

    def document_type(self, field) -> str:
        return DOCUMENT_TYPES[field.get_internal_type()]

    def document_value(self, column):
        """A time as the backend writes it (UTC, without an offset: its DATETIME has none), the
        other types of DOCUMENT_TYPES as PostgreSQL's, no others."""
        kind = column.field.get_internal_type()
        if kind not in DOCUMENT_TYPES:
            return NOT_PLAIN
        if kind == "DateTimeField":
            return functools.partial(column.field.get_db_prep_save, connection=self.connection)
        return column.to_plain


def server_problem(connection) -> str | None:
    """MariaDB 10.6+ is supported and tested; MySQL is not (no server to test it on)."""
    try:
        version = connection.mysql_version
    except Exception as exc:  # noqa: BLE001 - no server to ask: the check cannot say more
        return f"its server version could not be read ({exc})"
    shown = ".".join(map(str, version))
    if not connection.mysql_is_mariadb:
        return (f"MySQL {shown} is not supported (untested: only MariaDB 10.6+ is, "
                "see docs/databases.md)")
    if version < (10, 6):
        return f"MariaDB {shown} lacks SELECT ... FOR UPDATE SKIP LOCKED (10.6+)"
    return _time_zone_problem(connection)


def _time_zone_problem(connection) -> str | None:
    """With USE_TZ, Django stores UTC, but the job table's column defaults (``db_default=Now()``:
    ``CURRENT_TIMESTAMP(6)``, for jobs inserted by plain SQL) are in the session's time zone,
    which Django leaves as the server's: it must be UTC, or such jobs run hours early or late."""
    from django.conf import settings

    from .. import sql

    if not settings.USE_TZ:
        return None
    with connection.cursor() as cursor:
        cursor.execute(sql.session_utc_offset(connection), [])
        offset_seconds = cursor.fetchone()[0]
    if offset_seconds == 0:
        return None
    return (f"its session time zone is {offset_seconds / 3600:+g} h from UTC, so the job "
            "table's column defaults (jobs inserted by plain SQL) would not be UTC as Django's "
            "times are: set the server's default_time_zone to '+00:00', or add "
            "\"init_command\": \"SET time_zone = '+00:00'\" to the database's OPTIONS")
