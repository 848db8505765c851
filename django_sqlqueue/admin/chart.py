"""The throughput chart of the dashboard: inline SVG drawn on the server (no JavaScript, no
network). One bar per minute of the last hour: jobs that succeeded rise above the axis in green,
jobs that failed for good hang below it in red, on the same scale.
"""

import datetime as dt

from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import escape
from django.utils.safestring import mark_safe

from ..statuses import JobStatus
from .display import STATUS_COLOURS

GREEN = STATUS_COLOURS[JobStatus.SUCCEEDED]
RED = STATUS_COLOURS[JobStatus.EXHAUSTED]

WIDTH, HEIGHT = 600, 168
LEFT, RIGHT, TOP = 46, 10, 30
HALF = 52  # pixels above the axis, and below it
AXIS_Y = TOP + HALF


def nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 25, 50, 100, 200, 250... that is at least ``value``."""
    step = 1
    while True:
        for factor in (1, 2, 2.5, 5):
            if step * factor >= value and float(step * factor).is_integer():
                return int(step * factor)
        step *= 10


def throughput_svg(buckets, start, *, label: str):
    """``buckets``: one (succeeded, failed) pair per minute from ``start`` (an aware datetime)."""
    minutes = len(buckets)
    top = nice_ceiling(max([1] + [max(s, f) for s, f in buckets]))
    slot = (WIDTH - LEFT - RIGHT) / minutes
    bar = max(slot - 2, 1)
    scale = HALF / top
    succeeded = sum(s for s, _ in buckets)
    failed = sum(f for _, f in buckets)
    parts = [
        f'<svg class="sq-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(label)}: {succeeded} succeeded and {failed} failed in the last '
        f'{minutes} minutes" xmlns="http://www.w3.org/2000/svg">',
        # legend
        f'<rect x="{LEFT}" y="6" width="11" height="11" rx="2" fill="{GREEN}"/>',
        f'<text x="{LEFT + 16}" y="16" class="sq-legend">succeeded: {succeeded}</text>',
        f'<rect x="{LEFT + 150}" y="6" width="11" height="11" rx="2" fill="{RED}"/>',
        f'<text x="{LEFT + 166}" y="16" class="sq-legend">failed (ended exhausted): '
        f"{failed}</text>",
        f'<text x="{WIDTH - RIGHT}" y="16" text-anchor="end" class="sq-axis">jobs per minute'
        "</text>",
        # scale and axis
        _hline(TOP, dashed=True),
        _hline(AXIS_Y + HALF, dashed=True),
        f'<text x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end" class="sq-axis">{top}</text>',
        f'<text x="{LEFT - 6}" y="{AXIS_Y + 4}" text-anchor="end" class="sq-axis">0</text>',
        f'<text x="{LEFT - 6}" y="{AXIS_Y + HALF + 4}" text-anchor="end" '
        f'class="sq-axis">{top}</text>',
    ]
    for i, (ok, bad) in enumerate(buckets):
        x = LEFT + i * slot + (slot - bar) / 2
        minute = timezone.localtime(start + dt.timedelta(minutes=i))
        tip = f"{date_format(minute, 'H:i')}: {ok} succeeded, {bad} failed"
        parts.append(f"<g><title>{escape(tip)}</title>")
        parts.append(
            f'<rect x="{x:.1f}" y="{TOP}" width="{bar:.1f}" height="{2 * HALF}" '
            'fill="transparent"/>'
        )
        if ok:
            height = max(ok * scale, 1.5)
            parts.append(
                f'<rect x="{x:.1f}" y="{AXIS_Y - height:.1f}" width="{bar:.1f}" '
                f'height="{height:.1f}" fill="{GREEN}"/>'
            )
        if bad:
            height = max(bad * scale, 1.5)
            parts.append(
                f'<rect x="{x:.1f}" y="{AXIS_Y:.1f}" width="{bar:.1f}" height="{height:.1f}" '
                f'fill="{RED}"/>'
            )
        parts.append("</g>")
    parts.append(_hline(AXIS_Y))
    # time axis: a tick every 15 minutes, counted back from now
    for back in range(minutes, -1, -15):
        x = LEFT + (minutes - back) * slot
        text = "now" if back == 0 else f"−{back} min"
        anchor = "end" if back == 0 else ("start" if back == minutes else "middle")
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{AXIS_Y + HALF}" y2="{AXIS_Y + HALF + 4}" '
            'class="sq-grid"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{HEIGHT - 4}" text-anchor="{anchor}" '
            f'class="sq-axis">{text}</text>'
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - numbers, and text passed through escape()


def _hline(y, dashed=False) -> str:
    dash = ' stroke-dasharray="3 3"' if dashed else ""
    return (
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}" class="sq-grid"{dash}/>'
    )
