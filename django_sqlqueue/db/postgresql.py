"""PostgreSQL: NOTIFY in the insert's statement, JSON documents, the planner's row estimates."""

import json
import re

from .. import sql
from .base import DatabaseDriver


class PostgreSQLDriver(DatabaseDriver):
    vendor = "postgresql"
    supports_notify = True
    inserts_from_document = True
    sends_plain_values = True
    estimates_rows = True
    builds_indexes_concurrently = True

    def problem(self) -> str | None:
        return None

    def pipeline(self, statements: int):
        """psycopg's pipeline mode for more than one statement, where libpq supports it (one
        statement, like every ``enqueue()``, gains nothing from it)."""
        if statements < 2:
            return super().pipeline(statements)
        # Imported here: the package also serves SQLite-only installs, which have no psycopg.
        import psycopg

        if not psycopg.Pipeline.is_supported():
            return super().pipeline(statements)
        self.connection.ensure_connection()
        return self.connection.connection.pipeline()

    def document_type(self, field) -> str:
        """The column's type without length or precision (``varchar``, not ``varchar(255)``):
        a cast to ``varchar(255)`` would cut an over-long value, which must fail at the column."""
        return re.sub(r"\(\d+(,\s*\d+)?\)", "", field.cast_db_type(self.connection))

    def table_row_estimate(self, model) -> float:
        with self.connection.cursor() as cursor:
            cursor.execute(sql.TABLE_ROW_ESTIMATE,
                           [self.connection.ops.quote_name(model._meta.db_table)])
            row = cursor.fetchone()
        return max(row[0], 0) if row else 0

    def query_row_estimate(self, queryset) -> float:
        query_sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
        with self.connection.cursor() as cursor:
            cursor.execute(sql.explain_json(query_sql), params)
            plan = cursor.fetchone()[0]
        if isinstance(plan, str):
            plan = json.loads(plan)
        return plan[0]["Plan"]["Plan Rows"]
