"""``manage.py purgejobs --older-than 30d``: delete old finished jobs (for cron users)."""

import datetime as dt
import re

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Count
from django.utils import timezone

from ...enqueue.validation import queue_name
from ...models import Job
from ...statuses import FINISHED_STATUSES
from ..database_option import add_database_option, database_alias
from ..progress import Progress

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)([smhdw]?)")


def parse_duration(text: str) -> dt.timedelta:
    """'90' (seconds), '45s', '30m', '12h', '7d', '2w'."""
    match = _DURATION_RE.fullmatch(text.strip().lower())
    if not match:
        raise CommandError(
            f"--older-than {text!r} is not a duration: use a number with a unit, e.g. 30m, 12h, "
            "7d or 2w (a bare number means seconds)."
        )
    return dt.timedelta(seconds=float(match[1]) * _UNITS[match[2] or "s"])


class Command(BaseCommand):
    help = "Delete finished jobs (succeeded, exhausted, cancelled, expired) older than a duration."

    def add_arguments(self, parser):
        parser.add_argument("--older-than", required=True, metavar="DURATION",
                            help="finished longer ago than this: 30m, 12h, 7d, 2w")
        parser.add_argument("--status", "-s", action="append", dest="statuses", metavar="S",
                            help="only this finished status; repeat for several (default: all "
                                 "finished statuses)")
        parser.add_argument("--queue", "-q", action="append", dest="queues", metavar="Q",
                            help="only this queue; repeat for several (default: all queues)")
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")
        add_database_option(parser)

    def handle(self, *args, **options):
        age = parse_duration(options["older_than"])
        statuses = options["statuses"] or list(FINISHED_STATUSES)
        wrong = sorted(set(statuses) - set(FINISHED_STATUSES))
        if wrong:
            raise CommandError(
                f"--status {', '.join(wrong)}: only finished jobs can be purged; choose from "
                f"{', '.join(FINISHED_STATUSES)}. Cancel unfinished jobs instead."
            )
        try:
            queues = [queue_name(q) for q in options["queues"]] if options["queues"] else None
        except ValueError as exc:
            raise CommandError(f"--queue: {exc}") from None
        alias = database_alias(options, Job)
        cutoff = timezone.now() - age
        jobs = Job.objects.using(alias)
        jobs = jobs.in_queues(queues).filter(status__in=statuses, finished_at__lt=cutoff)
        counts = dict(jobs.values_list("status").annotate(n=Count("pk")).order_by())
        total = sum(counts.values())
        detail = ", ".join(f"{status} {counts[status]}" for status in sorted(counts)) or "none"
        verb = "would delete" if options["dry_run"] else "deleting"
        self.stdout.write(f"{verb} {total} job(s) finished before {cutoff:%Y-%m-%d %H:%M:%S %Z} "
                          f"({detail})")
        if options["dry_run"] or not total:
            return
        progress = Progress(self.stdout, total, verb="deleted")
        deleted = jobs.delete_in_batches(progress=progress.update)
        progress.finish()
        self.stdout.write(self.style.SUCCESS(f"deleted {deleted} job(s)"))
