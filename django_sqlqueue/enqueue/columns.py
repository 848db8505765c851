"""The job table's columns as an insert writes them (``inserting.py``): which ones, how a value
is said (plain text or a number, JSON as its text), and which values the row would get anyway
(NULL, the column's constant database default), so that an insert can leave those out."""

import datetime as dt
import functools
import json
import operator
from typing import NamedTuple

from django.db.models.expressions import Value

from ..db.pieces import NOT_PLAIN as _NOT_PLAIN

#: Compact JSON, NaN refused: how JSON values go into an insert.
JSON = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def all_identical(values: tuple) -> bool:
    """Whether every value (all of one type) is the first, as stored: inside JSON too, where
    1, 1.0 and True differ though Python finds them equal."""
    first = values[0]
    return values.count(first) == len(values) and (
        not isinstance(first, (dict, list))
        or not first  # equal to an empty container: empty too
        or all(value is first or _same_json(value, first) for value in values)
    )


def _same_json(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_json(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same_json, a, b))
    return a == b


#: How a value of each field type is made plain (text, a number, a bool; None: it already is).
#: PostgreSQL reads them back exactly: ISO 8601 keeps the offset and the microseconds, a
#: float's repr() all its digits. JSON values are sent as JSON. Other field types go through
#: their field's get_db_prep_save, and are never put in the document.
_PLAIN = {
    **dict.fromkeys(
        ["CharField", "TextField", "BooleanField", "FloatField", "IntegerField",
         "SmallIntegerField", "BigIntegerField", "PositiveIntegerField",
         "PositiveSmallIntegerField", "PositiveBigIntegerField", "JSONField"],
    ),
    "DateTimeField": dt.datetime.isoformat,
    "UUIDField": str,
}


class Column(NamedTuple):
    field: object
    name: str
    to_plain: object  # from _PLAIN, or _NOT_PLAIN
    is_json: bool
    null_by_default: bool  # no database default: an INSERT that leaves it out writes NULL
    # The database default, as a value (JSON decoded from its text), where it is a constant;
    # NO_DEFAULT where there is none or it is computed (Now()).
    default: object

    def is_default(self, value) -> bool:
        """Whether an INSERT that leaves this column out writes ``value`` (as stored: JSON by
        its text, where 1 and true differ; a bool is never taken for 0 or 1)."""
        default = self.default
        if default is NO_DEFAULT or value is None:
            return False
        if self.is_json:
            # Equality first (a payload against "{}" differs by its length at once), so that
            # the text, compared only then, is not encoded here as well as in as_param.
            return (isinstance(value, (dict, list)) and value == default
                    and JSON.encode(value) == JSON.encode(default))
        return value == default and isinstance(value, bool) == isinstance(default, bool)

    def as_param(self, value, connection, plain: bool):
        """``value`` as a statement parameter (JSON as its text); ``plain``: the driver's
        ``sends_plain_values``."""
        if self.is_json:
            return JSON.encode(value)
        if self.to_plain is _NOT_PLAIN or not plain:
            return self.field.get_db_prep_save(value, connection)
        return value if self.to_plain is None else self.to_plain(value)


@functools.cache
def columns(model) -> tuple:
    """The columns an insert may write: all but the primary key."""
    found = []
    for field in model._meta.concrete_fields:
        if field is model._meta.pk:
            continue
        kind = field.get_internal_type()
        found.append(Column(
            field, field.column, _PLAIN.get(kind, _NOT_PLAIN), kind == "JSONField",
            not field.has_db_default(), _constant_default(field),
        ))
    return tuple(found)


NO_DEFAULT = object()


def _constant_default(field):
    """``field``'s database default where it is a constant (``db_default=0``,
    ``db_default=Value("[]")``: a JSON field's, given as its text, decoded), else
    ``NO_DEFAULT``."""
    if not field.has_db_default():
        return NO_DEFAULT
    default = field.db_default
    if isinstance(default, Value):
        default = default.value
    elif hasattr(default, "resolve_expression"):
        return NO_DEFAULT  # computed by the database (Now())
    if field.get_internal_type() == "JSONField":
        # Given as its text here; anything else is not a default this module can compare.
        return json.loads(default) if isinstance(default, str) else NO_DEFAULT
    if isinstance(default, (str, int, float, bool)):
        return default
    return NO_DEFAULT


@functools.cache
def attrgetter(model):
    return operator.attrgetter(*(column.field.attname for column in columns(model)))
