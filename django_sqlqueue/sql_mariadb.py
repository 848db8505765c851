"""MariaDB's SQL text: what sql.py's statements become on a database without partial indexes and
without ``UPDATE ... RETURNING`` (docs/databases.md). sql.py calls these for ``vendor ==
"mysql"``; nothing else does.

Values always travel as query parameters; only column and table names (quoted by the backend),
the status constants of statuses.py and ``%s`` placeholders are put into the SQL text.

**No partial indexes**: migration 0012 adds two persistent generated columns, ``is_ready`` (1
while the job waits to be claimed, else NULL) and ``unfinished_unique_key`` (the unique key
while the job is unfinished, else NULL), and puts the ready indexes behind ``is_ready`` and the
unique index on ``unfinished_unique_key`` (NULLs never collide). A claim names ``is_ready = 1``
so that the index is used: MariaDB does not substitute the generated column's expression.

**No UPDATE ... RETURNING**: a statement that updates rows and returns some of their columns is
a ``Stepped`` statement: in one transaction, a locking SELECT of the rows' ids, the UPDATE of
those ids, and a SELECT of the columns; ``returning.fetch`` runs it.
"""

from collections.abc import Callable
from typing import NamedTuple

from django.conf import settings

from .statuses import READY_STATUSES, UNFINISHED_STATUSES

#: The generated columns of migration 0012, not fields of the model.
READY_COLUMN = "is_ready"
UNFINISHED_KEY_COLUMN = "unfinished_unique_key"


class Stepped(NamedTuple):
    """An update that returns columns, in three statements run in one transaction.

    ``lock``: SELECT the ids of the rows to update (``FOR UPDATE``, or ``FOR UPDATE SKIP
    LOCKED`` for a claim); ``update(n)``/``read(n)``: the UPDATE, and the SELECT of the returned
    columns, of ``n`` ids given as the last ``n`` parameters; ``split(params)``: the caller's
    parameters (laid out as for the one-statement version) as (lock's, update's)."""

    lock: str
    update: Callable[[int], str]
    read: Callable[[int], str]
    split: Callable[[list], tuple[list, list]]


def _ids(count: int) -> str:
    return ", ".join(["%s"] * count)


# ---- the database's clock ---------------------------------------------------------------------

def now_sql(plus_seconds: bool = False) -> str:
    """SQL text for "now" (sql.now_sql): the start of the statement, to the microsecond, in UTC
    as Django stores it with USE_TZ (local time without it); ``plus_seconds``: plus the seconds
    of the next parameter. Constant within a statement: every row of one claim gets the same."""
    clock = "UTC_TIMESTAMP(6)" if settings.USE_TZ else "NOW(6)"
    if plus_seconds:
        return f"TIMESTAMPADD(MICROSECOND, ROUND(%s * 1000000), {clock})"
    return clock


# ---- the schema of migration 0012 ---------------------------------------------------------

def _index_parts(columns) -> str:
    return ", ".join(f"`{name[1:]}` DESC" if name.startswith("-") else f"`{name}`"
                     for name in columns)


#: The indexes migration 0012 redefines: (name, columns behind ``is_ready``). Django created each
#: as a plain index of the columns (MariaDB ignores an index's condition): of every row, finished
#: ones included, so that a claim walked past every finished job in its order.
READY_INDEXES = (
    ("sqlqueue_job_ready", ("queue", "-priority", "run_at", "id")),
    ("sqlqueue_job_ready_any_queue", ("-priority", "run_at", "id")),
    ("sqlqueue_job_ready_by_key", ("queue", "concurrency_key", "-priority", "run_at", "id")),
    ("sqlqueue_job_expiring", ("expires_at",)),
)


def add_generated_columns() -> str:
    """Migration 0012 forwards: the generated columns and the indexes on them, as one ALTER
    TABLE, which MariaDB applies whole or not at all (its DDL is atomic per statement since
    10.6, though not transactional): a failed run leaves the table as it was and can run again.
    """
    ready = ", ".join(f"'{status}'" for status in READY_STATUSES)
    unfinished = ", ".join(f"'{status}'" for status in UNFINISHED_STATUSES)
    parts = [
        f"ADD COLUMN `{READY_COLUMN}` TINYINT AS "
        f"(CASE WHEN `status` IN ({ready}) THEN 1 END) PERSISTENT",
        f"ADD COLUMN `{UNFINISHED_KEY_COLUMN}` VARCHAR(255) AS "
        f"(CASE WHEN `status` IN ({unfinished}) THEN `unique_key` END) PERSISTENT",
    ]
    for name, columns in READY_INDEXES:
        parts += [f"DROP INDEX `{name}`",
                  f"ADD INDEX `{name}` (`{READY_COLUMN}`, {_index_parts(columns)})"]
    parts.append(f"ADD UNIQUE INDEX `sqlqueue_job_unique_key` (`{UNFINISHED_KEY_COLUMN}`)")
    return "ALTER TABLE `django_sqlqueue_job` " + ", ".join(parts)


def drop_generated_columns() -> str:
    """Migration 0012 backwards: the indexes as Django made them, without the columns (one
    ALTER TABLE, like ``add_generated_columns``)."""
    parts = ["DROP INDEX `sqlqueue_job_unique_key`"]
    for name, columns in READY_INDEXES:
        parts += [f"DROP INDEX `{name}`", f"ADD INDEX `{name}` ({_index_parts(columns)})"]
    parts += [f"DROP COLUMN `{UNFINISHED_KEY_COLUMN}`", f"DROP COLUMN `{READY_COLUMN}`"]
    return "ALTER TABLE `django_sqlqueue_job` " + ", ".join(parts)
