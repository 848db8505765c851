"""The few statements the ORM cannot say in one round trip, each named and explained.

Values always travel as query parameters; only column and table names (quoted by the backend)
are put into the SQL text.
"""


def claim_jobs(picked_ids_sql: str, picked_params, model, connection, set_values: dict):
    """UPDATE the picked rows to the values in ``set_values`` and return the updated rows.

    ``picked_ids_sql`` selects the ids to claim; on PostgreSQL it ends in ``FOR UPDATE SKIP
    LOCKED``, so concurrent claimers each lock different rows and never wait for each other. On
    SQLite the single UPDATE statement runs under the database's write lock, and its WHERE re-reads
    the rows as they are then, so two claimers can never update the same row either.

    ``attempts`` is always incremented in SQL (not from a value read earlier).
    """
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    assignments, params = [], []
    for field_name, value in set_values.items():
        field = model._meta.get_field(field_name)
        assignments.append(f"{quote(field.column)} = %s")
        params.append(field.get_db_prep_save(value, connection))
    attempts = quote(model._meta.get_field("attempts").column)
    assignments.append(f"{attempts} = {attempts} + 1")
    columns = ", ".join(quote(f.column) for f in model._meta.concrete_fields)
    pk = quote(model._meta.pk.column)
    sql = (
        f"UPDATE {table} SET {', '.join(assignments)} "  # noqa: S608 - names only, values are params
        f"WHERE {pk} IN ({picked_ids_sql}) RETURNING {columns}"
    )
    return sql, (*params, *picked_params)


def complete_many(model, connection, rows):
    """Mark many running jobs succeeded in one statement; returns (sql, params).

    ``rows`` are ``(id, claim_token, result, finished_at)``, already prepared for the database.
    The write is fenced row by row (id, claim token, still running) like ``Job.complete()``;
    RETURNING lists the ids it updated, so the caller knows which claims were still valid.
    """
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    col = {name: quote(model._meta.get_field(name).column) for name in
           ("id", "claim_token", "result", "finished_at", "status", "lease_expires_at")}
    params = [value for row in rows for value in row]
    if connection.vendor == "postgresql":
        values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
        sql = (
            f"UPDATE {table} AS job SET {col['status']} = 'succeeded', "  # noqa: S608 - names only
            f"{col['result']} = v.result::jsonb, "
            f"{col['finished_at']} = v.finished_at::timestamptz, "
            f"{col['lease_expires_at']} = NULL "
            f"FROM (VALUES {values}) AS v (id, token, result, finished_at) "
            f"WHERE job.{col['id']} = v.id AND job.{col['claim_token']} = v.token::uuid "
            f"AND job.{col['status']} = 'running' RETURNING job.{col['id']}"
        )
    else:  # SQLite 3.35+: UPDATE ... FROM, VALUES columns are column1..column4
        values = ", ".join(["(?, ?, ?, ?)"] * len(rows)).replace("?", "%s")
        sql = (
            f"UPDATE {table} SET {col['status']} = 'succeeded', "  # noqa: S608 - names only
            f"{col['result']} = v.column3, {col['finished_at']} = v.column4, "
            f"{col['lease_expires_at']} = NULL "
            f"FROM (VALUES {values}) AS v "
            f"WHERE {table}.{col['id']} = v.column1 AND {table}.{col['claim_token']} = v.column2 "
            f"AND {table}.{col['status']} = 'running' RETURNING {table}.{col['id']}"
        )
    return sql, params
