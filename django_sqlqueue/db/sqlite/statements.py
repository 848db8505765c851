"""SQLite's SQL text of its own: its clock, the write that only takes the write lock, and a tag
look-up without JSON containment. ``driver.py`` assembles them; the statements SQLite shares
with PostgreSQL are in ``base.py`` and ``writes.py``.

Only quoted names and ``%s`` placeholders go into the text; values travel as parameters."""


def now(*, plus_seconds: bool, local: bool) -> str:
    """SQL text for "now" as the column stores it: text to the microsecond, ``local`` time (else
    UTC), with ``plus_seconds`` plus the seconds of the next parameter.

    SQLite computes 'now' once per statement step, after taking its write lock, to the
    millisecond. This is the end of that millisecond: never earlier than a time Python wrote to
    the microsecond just before (a job's enqueued_at and run_at), and text exactly as Django
    writes the same time ('YYYY-MM-DD HH:MM:SS.ffffff', the microseconds never zero), so that a
    value read back and compared for equality (a fence on the lease) matches. For text passed
    with params (``%`` doubled)."""
    shift = ", printf('%%+.6f seconds', %s)" if plus_seconds else ""
    zone = ", 'localtime'" if local else ""
    return f"(strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'{zone}{shift}) || '999')"


def take_write_lock(table: str, pk: str) -> str:
    """A write that changes no row of ``table`` (quoted; ``pk`` its quoted key): the statement
    still takes the RESERVED lock, waiting for it as long as the busy timeout allows."""
    return f"UPDATE {table} SET {pk} = {pk} WHERE 0 = 1"  # noqa: S608 - names only


def has_tag(table: str, column: str) -> str:
    """A condition: the row's tags (``column`` of ``table``, quoted) hold the parameter's tag,
    looked for by ``json_each`` (SQLite has no JSON containment, and no index serves it)."""
    return f"EXISTS (SELECT 1 FROM json_each({table}.{column}) WHERE value = %s)"  # noqa: S608
