"""Run a statement of a driver that changes rows and returns some of their columns, on any
database: one statement with ``RETURNING`` on PostgreSQL and SQLite; on MariaDB, which has no
``UPDATE ... RETURNING``, the few statements of a ``Stepped`` (mariadb/statements.py), in one
transaction (the caller's if there is one). Callers stay the same for every database."""

from django.db import transaction

from . import ops


def fetch(connection, statement, params, *, repeated: bool = False) -> list:
    """Execute ``statement`` (SQL text, or an object with ``run(cursor, params)``) with
    ``params``; return the rows it returns. ``repeated``: a statement the connection runs again
    and again (the claim), which the driver may prepare (``repeated_cursor``)."""
    cursor = ops(connection).repeated_cursor() if repeated else None
    with cursor or connection.cursor() as cursor:
        if isinstance(statement, str):
            cursor.execute(statement, params)
            return cursor.fetchall()
        # The steps lock rows, then change and read them: one transaction, so that the locks
        # hold from the first step to the last.
        with transaction.atomic(using=connection.alias, savepoint=False):
            return statement.run(cursor, params)
