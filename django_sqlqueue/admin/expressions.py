"""SQL for the job list: the newest error of a job, read in the database.

The list shows why each job last failed without loading its ``errors`` column, which holds up to
``MAX_TRACEBACK_CHARS`` of traceback per attempt: only the first characters of one key of the
last entry leave the database.
"""

from django.db.models import CharField, F, Func

SUMMARY_CHARS = 300


class LastError(Func):
    """``errors[-1][key]``, cut to SUMMARY_CHARS; NULL when there is no error (or on databases
    other than PostgreSQL, SQLite and MariaDB, where the list simply shows no error summary)."""

    output_field = CharField()

    def __init__(self, key: str):
        if key not in ("type", "message"):
            raise ValueError(f"LastError reads 'type' or 'message', not {key!r}")
        self.key = key
        super().__init__(F("errors"))

    def _column(self, compiler):
        return compiler.compile(self.get_source_expressions()[0])

    def as_postgresql(self, compiler, connection, **extra_context):
        column, params = self._column(compiler)
        return f"LEFT(({column} -> -1 ->> %s), {SUMMARY_CHARS})", (*params, self.key)

    def as_sqlite(self, compiler, connection, **extra_context):
        column, params = self._column(compiler)
        path = f"$[#-1].{self.key}"
        return f"SUBSTR(JSON_EXTRACT({column}, %s), 1, {SUMMARY_CHARS})", (*params, path)

    def as_mysql(self, compiler, connection, **extra_context):
        # MariaDB reads a negative index ($[-1]) only from 10.9: the last index, counted.
        column, params = self._column(compiler)
        path = f"CONCAT('$[', JSON_LENGTH({column}) - 1, '].', %s)"
        return (f"CASE WHEN JSON_LENGTH({column}) > 0 THEN LEFT(JSON_UNQUOTE(JSON_EXTRACT("
                f"{column}, {path})), {SUMMARY_CHARS}) END",
                (*params, *params, *params, *params, self.key))

    def as_sql(self, compiler, connection, **extra_context):
        return "NULL", ()
