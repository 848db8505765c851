"""The few statements the ORM cannot say in one round trip, each named and explained.

Values always travel as query parameters; only column and table names (quoted by the backend)
and the status constants of statuses.py are put into the SQL text.
"""

import json

from .statuses import READY_STATUSES


def ready_ids(model, connection, *, queue_count: int | None):
    """SELECT the ids of ready jobs in claim order, up to a limit; returns the SQL text.

    Parameters, in order: now, now, the queue names (``queue_count`` of them; ``None`` means
    every queue, with no queue condition), the limit.

    This is ``Job.objects.ready(now).in_queues(...).order_by(*CLAIM_ORDER)[:limit]`` written out
    once, because compiling that queryset on every claim cost more than running it. The status
    list is in the text, not a parameter, so that the partial ready indexes match it even with
    server-side binding. With one queue the condition is ``queue = %s``, so the claim walks
    ``sqlqueue_job_ready``; with every queue it walks ``sqlqueue_job_ready_any_queue``.
    """
    quote = connection.ops.quote_name
    col = {name: quote(model._meta.get_field(name).column) for name in
           ("id", "status", "run_at", "expires_at", "queue", "priority")}
    statuses = ", ".join(f"'{status}'" for status in READY_STATUSES)
    queue = ""
    if queue_count == 1:
        queue = f" AND {col['queue']} = %s"
    elif queue_count:
        queue = f" AND {col['queue']} IN ({', '.join(['%s'] * queue_count)})"
    skip_locked = connection.features.has_select_for_update_skip_locked
    lock = " FOR UPDATE SKIP LOCKED" if skip_locked else ""
    return (
        f"SELECT {col['id']} FROM {quote(model._meta.db_table)} "  # noqa: S608 - names only
        f"WHERE {col['status']} IN ({statuses}) AND {col['run_at']} <= %s "
        f"AND ({col['expires_at']} IS NULL OR {col['expires_at']} > %s){queue} "
        f"ORDER BY {col['priority']} DESC, {col['run_at']}, {col['id']} LIMIT %s{lock}"
    )


def claim_jobs(picked_ids_sql: str, model, connection, set_fields, returning):
    """UPDATE the picked rows to ``set_fields`` (parameters, in that order, before those of
    ``picked_ids_sql``) and return the columns of ``returning`` (field names); returns the SQL
    text.

    ``picked_ids_sql`` selects the ids to claim; on PostgreSQL it ends in ``FOR UPDATE SKIP
    LOCKED``, so concurrent claimers each lock different rows and never wait for each other. On
    SQLite the single UPDATE statement runs under the database's write lock, and its WHERE re-reads
    the rows as they are then, so two claimers can never update the same row either. One
    statement is atomic on its own: it needs no surrounding transaction (no BEGIN/COMMIT round
    trips).

    ``attempts`` is always incremented in SQL (not from a value read earlier).
    """
    quote = connection.ops.quote_name
    assignments = [f"{quote(model._meta.get_field(name).column)} = %s" for name in set_fields]
    attempts = quote(model._meta.get_field("attempts").column)
    assignments.append(f"{attempts} = {attempts} + 1")
    columns = ", ".join(quote(model._meta.get_field(name).column) for name in returning)
    return (
        f"UPDATE {quote(model._meta.db_table)} SET {', '.join(assignments)} "  # noqa: S608
        f"WHERE {quote(model._meta.pk.column)} IN ({picked_ids_sql}) RETURNING {columns}"
    )


def complete_many(model, connection, rows):
    """Mark many running jobs succeeded in one statement; returns (sql, params).

    ``rows`` are ``(id, claim_token, result, finished_at)`` as Python values. The write is fenced
    row by row (id, claim token, still running) like ``Job.complete()``; RETURNING lists the ids
    it updated, so the caller knows which claims were still valid. On PostgreSQL the rows travel
    as one JSON document that ``json_to_recordset`` turns into typed columns: one parameter, so
    the statement text is the same for every batch size, and ``json.dumps`` builds it in C (the
    driver's array adaptation of four lists cost more than the rest of the write). A JSON null
    result is stored as SQL NULL, as the ORM stores ``result=None``.
    """
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    col = {name: quote(model._meta.get_field(name).column) for name in
           ("id", "claim_token", "result", "finished_at", "status", "lease_expires_at")}
    if connection.vendor == "postgresql":
        document = json.dumps([
            {"id": pk, "token": str(token), "result": result, "finished_at": finished.isoformat()}
            for pk, token, result, finished in rows
        ])
        sql = (
            f"UPDATE {table} AS job SET {col['status']} = 'succeeded', "  # noqa: S608 - names only
            f"{col['result']} = v.result, {col['finished_at']} = v.finished_at, "
            f"{col['lease_expires_at']} = NULL "
            "FROM json_to_recordset(%s::json) "
            "AS v (id bigint, token uuid, result jsonb, finished_at timestamptz) "
            f"WHERE job.{col['id']} = v.id AND job.{col['claim_token']} = v.token "
            f"AND job.{col['status']} = 'running' RETURNING job.{col['id']}"
        )
        return sql, [document]
    # SQLite 3.35+: UPDATE ... FROM (VALUES ...), whose columns are column1..column4.
    fields = [model._meta.get_field(name) for name in ("id", "claim_token", "result",
                                                          "finished_at")]
    params = [field.get_db_prep_save(value, connection)
              for row in rows for field, value in zip(fields, row, strict=True)]
    values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    sql = (
        f"UPDATE {table} SET {col['status']} = 'succeeded', "  # noqa: S608 - names only
        f"{col['result']} = v.column3, {col['finished_at']} = v.column4, "
        f"{col['lease_expires_at']} = NULL "
        f"FROM (VALUES {values}) AS v "
        f"WHERE {table}.{col['id']} = v.column1 AND {table}.{col['claim_token']} = v.column2 "
        f"AND {table}.{col['status']} = 'running' RETURNING {table}.{col['id']}"
    )
    return sql, params
