"""Claimed rows into model instances, as ``Model.from_db`` makes them but faster (the claim
loads dozens of rows a few hundred times a second)."""

import datetime as dt

from django.db import connections
from django.utils import timezone

from ..db import ops
from ..db.instances import builds_directly, new_instance


def rows_to_models(model, alias, rows, *, fields=None, known=None) -> list:
    """Model instances, as ``Model.from_db`` makes them, from ``rows`` of ``fields`` (names;
    default every concrete field, in order) plus ``known`` values ``{name: value}`` of the fields
    the rows leave out. Row values are converted as the ORM converts query results (JSON text,
    SQLite's dates and UUIDs...)."""
    connection = connections[alias]
    fields = tuple(fields or (f.name for f in model._meta.concrete_fields))
    attnames, _ = _conversion_plan(connection, model, fields)
    known = {model._meta.get_field(name).attname: value for name, value in (known or {}).items()}
    direct = builds_directly(model)  # once per claim, not per row
    instances = []
    for values in converted_rows(model, alias, rows, fields):
        attrs = dict(zip(attnames, values, strict=True))
        attrs.update(known)
        instances.append(new_instance(model, attrs, db=alias, adding=False, direct=direct))
    return instances


def converted_rows(model, alias, rows, fields) -> list:
    """``rows`` of ``fields`` (names of ``model``'s fields) read by a statement of our own, each
    as a list of values converted as the ORM converts query results (JSON text, SQLite's
    booleans, dates and UUIDs...)."""
    connection = connections[alias]
    _, converters = _conversion_plan(connection, model, tuple(fields))
    converted = []
    for row in rows:
        values = list(row)
        for index, col, functions in converters:
            for convert in functions:
                values[index] = convert(values[index], col, connection)
        converted.append(values)
    return converted


def _conversion_plan(connection, model, fields):
    """(attnames, [(index, column, converters)] for the columns that have converters), cached
    on the connection (converters depend on the database backend)."""
    plans = connection.__dict__.setdefault("_sqlqueue_conversion_plans", {})
    plan = plans.get((model, fields))
    if plan is None:
        table = model._meta.db_table
        model_fields = [model._meta.get_field(name) for name in fields]
        converters = []
        for index, field in enumerate(model_fields):
            col = field.get_col(table)
            functions = [*connection.ops.get_db_converters(col), *col.get_db_converters(connection)]
            if (ops(connection).returns_values_before_affinity
                    and field.get_internal_type() == "FloatField"):
                # SQLite's RETURNING gives the value before the column's REAL affinity applies
                # (5, not the 5.0 a SELECT reads); the ORM has no converter for that.
                functions.append(_as_float)
            if functions:
                converters.append((index, col, functions))
        plan = plans[(model, fields)] = ([f.attname for f in model_fields], converters)
    return plan


def _as_float(value, expression, connection):
    return value if value is None else float(value)


def in_claim_order(model, candidates) -> list:
    """Rows ``(id, concurrency key, priority, run_at)`` read by the driver's
    ``ready_ids_by_key``, with run_at as a datetime, sorted in claim order (higher priority
    first, then the earliest run_at, then the oldest)."""
    run_at = model._meta.get_field("run_at")
    candidates = [
        (pk, key, priority, run_at.to_python(when) if isinstance(when, str) else when)
        for pk, key, priority, when in candidates]
    candidates.sort(key=lambda c: (-c[2], _comparable(c[3]), c[0]))
    return candidates


def _comparable(when):
    """Naive and aware datetimes sort together (SQLite's text comes back naive)."""
    if isinstance(when, dt.datetime) and timezone.is_naive(when):
        return when.replace(tzinfo=dt.UTC)
    return when
