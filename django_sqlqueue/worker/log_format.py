"""How the worker's lines are written: ``runworker --log-format text|keyvalue|json``.

``text`` is for people: the banner, and the log lines as ``time LEVEL message``. ``keyvalue``
(logfmt) and ``json`` are for log pipelines: every line the worker writes, its own (start, stop,
signals, progress, the supervisor's) and its log records (job finished, errors...), is one line
with the same leading keys ``ts`` (UTC, ISO 8601), ``level``, ``logger`` and ``event``, then the
event's own keys (docs/observability.md lists them). A log record that names no event (a
project's, or a rare one of ours) is ``event=log`` with its text in ``message``; a traceback is
in ``exception``, escaped onto the one line.

Events are passed to the logging calls as ``extra={"sqlqueue": {"event": ..., ...}}`` (see
:func:`fields`), so the text lines stay as they are and the structured ones need no parsing.
Hand-written, not a library: the two formats are a dozen lines, and a dependency (structlog,
python-json-logger) would be one more for every install of a reusable app.
"""

import datetime as dt
import json
import logging
import re

FORMATS = ("text", "keyvalue", "json")
#: A key=value value written as is; any other is quoted as a JSON string.
_BARE = re.compile(r"^[\w.:/@+,-]+$")


def fields(event: str, **values) -> dict:
    """The ``extra`` of a logging call that is an event with stable keys."""
    return {"sqlqueue": {"event": event, **values}}


def render(log_format: str, record: dict) -> str:
    """One line (no newline) of ``record`` (an ordered dict of keys) as key=value or JSON."""
    if log_format == "json":
        return json.dumps(record, default=str, ensure_ascii=False, separators=(",", ":"))
    return " ".join(f"{key}={_value(value)}" for key, value in record.items())


def _value(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, list | tuple):
        value = ",".join(map(str, value))
    value = str(value)
    return value if _BARE.match(value) else json.dumps(value, ensure_ascii=False)


def line(log_format: str, event: str, *, level="info", logger="django_sqlqueue.worker",
         **values) -> str:
    """A line the worker prints itself (not through logging)."""
    return render(log_format, {"ts": _now(), "level": level, "logger": logger, "event": event,
                               **values})


def _now(created: float | None = None) -> str:
    at = dt.datetime.now(dt.timezone.utc) if created is None else dt.datetime.fromtimestamp(
        created, dt.timezone.utc)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Formatter(logging.Formatter):
    """A log record as one line in ``log_format``; usable in a project's ``LOGGING`` too:
    ``{"()": "django_sqlqueue.worker.log_format.Formatter", "log_format": "json"}``."""

    def __init__(self, log_format: str = "json"):
        if log_format not in FORMATS:
            raise ValueError(f"log_format must be one of {', '.join(FORMATS)}, not "
                             f"{log_format!r}.")
        super().__init__("%(asctime)s %(levelname)s %(message)s")
        self.log_format = log_format

    def format(self, record):
        if self.log_format == "text":
            return super().format(record)
        data = {"ts": _now(record.created), "level": record.levelname.lower(),
                "logger": record.name}
        event = getattr(record, "sqlqueue", None)
        if event:
            data.update(event)
        else:
            data["event"] = "log"
            data["message"] = record.getMessage()
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return render(self.log_format, data)
