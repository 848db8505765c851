"""Formatting shared by the admin pages: status colours and badges, durations, JSON."""

import json

import django
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from ..observability.durations import seconds_text
from ..statuses import JobStatus

#: One colour per status, used by the badges and by every chart.
#: Django 6.1 writes the admin's breadcrumbs as ``<ol class="breadcrumbs"><li>...`` and styles
#: only that; before, ``<div class="breadcrumbs">``. Our own pages' breadcrumbs follow
#: (includes/breadcrumbs.html), or they show unstyled.
BREADCRUMBS_AS_LIST = django.VERSION >= (6, 1)

STATUS_COLOURS = {
    JobStatus.QUEUED: "#3b7dd8",
    JobStatus.RUNNING: "#0e8fa3",
    JobStatus.SUCCEEDED: "#2e9d4a",
    JobStatus.FAILED: "#c77700",
    JobStatus.EXHAUSTED: "#d1344b",
    JobStatus.CANCELLED: "#7d8590",
    JobStatus.EXPIRED: "#8a6d3b",
    JobStatus.WAITING: "#8e7cc3",
}
#: The order statuses are listed in: the life of a job, problems last.
STATUS_ORDER = [
    JobStatus.WAITING, JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.SUCCEEDED,
    JobStatus.FAILED, JobStatus.EXHAUSTED, JobStatus.CANCELLED, JobStatus.EXPIRED,
]


def status_label(status) -> str:
    try:
        return str(JobStatus(status).label)
    except ValueError:
        return str(status)


def status_badge(status):
    colour = STATUS_COLOURS.get(status, "#555")
    return format_html(
        '<span class="sq-badge" style="background:{}">{}</span>', colour, status_label(status)
    )


def between(start, end):
    """Seconds from ``start`` to ``end``, or None if either is missing."""
    if start is None or end is None:
        return None
    return (end - start).total_seconds()


def relative(value, now=None, *, coarse=False) -> str:
    delta = (value - (now or timezone.now())).total_seconds()
    if delta > 0:
        return f"in {seconds_text(delta, coarse=coarse)}"
    return f"{seconds_text(-delta, coarse=coarse)} ago"


def absolute(value) -> str:
    return date_format(timezone.localtime(value), "Y-m-d H:i:s T")


def when(value, now=None):
    """A timestamp in the current time zone, and how far it is from now:
    "2026-01-02 12:03:15 UTC (4 m ago)"."""
    if value is None:
        return "-"
    return format_html(
        '{} <span class="sq-muted">({})</span>', absolute(value), relative(value, now)
    )


def progress_bar(progress, now=None):
    """A job's latest progress (``Job.progress``): a bar when it has a total, then "3 of 10
    (30%)", its message and how long ago it was written; None (the admin's dash) if none."""
    if progress is None:
        return None
    amount = progress.amount
    if progress.total is not None:
        amount = format_html('<progress class="sq-progress" value="{}" max="{}"></progress> {}',
                             progress.done, progress.total or 1, amount)
    message = format_html(" &middot; {}", progress.message) if progress.message else ""
    return format_html('{}{} <span class="sq-muted">({})</span>', amount, message,
                       relative(progress.at, now))


def when_short(value, now=None):
    """How far from now, with the timestamp as a tooltip: for list columns."""
    if value is None:
        return "-"
    return format_html(
        '<span title="{}">{}</span>', absolute(value), relative(value, now, coarse=True)
    )


def breakable(text: str, separators=".:"):
    """Let a long dotted name wrap after its separators in a narrow column."""
    parts, current = [], ""
    for char in text:
        current += char
        if char in separators:
            parts.append(current)
            current = ""
    parts.append(current)
    return format_html_join(mark_safe("<wbr>"), "{}", ((part,) for part in parts))


def pretty_json(value):
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return format_html('<pre class="sq-json">{}</pre>', text)


def short_type(kind: str) -> str:
    """``builtins.RuntimeError`` -> ``RuntimeError``."""
    return (kind or "").rsplit(".", 1)[-1]
