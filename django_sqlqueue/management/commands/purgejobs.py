"""``manage.py purgejobs --older-than 30d``: delete old finished jobs (for cron users).

It deletes for good, so it guesses nothing: a duration needs its unit, and it says what it will
delete (by status and queue) before it does, then asks on a terminal; elsewhere (cron, CI) it
deletes only with ``--noinput``, as Django's ``flush`` does."""

import datetime as dt
import re
import sys

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Count
from django.utils import timezone

from ...enqueue.validation import queue_name
from ...models import Job
from ...statuses import FINISHED_STATUSES
from ..database_option import add_database_option, database_alias
from ..progress import Progress

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
#: The queues listed one per line before a purge; the others are summed on one line.
LISTED_QUEUES = 20


def parse_duration(text: str) -> dt.timedelta:
    """'45s', '30m', '12h', '7d', '2w', '1.5h'. A bare number is refused: ``--older-than 3``
    once meant 3 seconds, and deleted the jobs of the last days as well."""
    match = _DURATION_RE.fullmatch(text.strip().lower())
    if match:
        return dt.timedelta(seconds=float(match[1]) * _UNITS[match[2]])
    if re.fullmatch(r"\d+(?:\.\d+)?", text.strip()):
        raise CommandError(
            f"--older-than {text!r} has no unit: write it with one, e.g. {text.strip()}d for "
            f"days ({text.strip()}s, {text.strip()}m, {text.strip()}h, {text.strip()}d or "
            f"{text.strip()}w). A bare number is refused: this command deletes."
        )
    raise CommandError(
        f"--older-than {text!r} is not a duration: use a number with a unit, s, m, h, d or w, "
        "e.g. 45s, 30m, 12h, 7d or 2w."
    )


def counts_line(counts: dict) -> str:
    """``exhausted 12, succeeded 18330``."""
    return ", ".join(f"{status} {counts[status]}" for status in sorted(counts))


class Command(BaseCommand):
    help = (
        "Delete finished jobs (succeeded, exhausted, cancelled, expired) older than a duration "
        "with its unit (30m, 12h, 7d, 2w). Says what it will delete, by status and queue, then "
        "asks on a terminal; --noinput deletes without asking (cron), --dry-run only counts."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than", required=True, metavar="DURATION",
                            help="finished longer ago than this, with a unit: 45s, 30m, 12h, "
                                 "7d, 2w (a bare number is refused)")
        parser.add_argument("--status", "-s", action="append", dest="statuses", metavar="S",
                            help="only this finished status; repeat for several (default: all "
                                 "finished statuses)")
        parser.add_argument("--queue", "-q", action="append", dest="queues", metavar="Q",
                            help="only this queue; repeat for several (default: all queues)")
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")
        parser.add_argument("--noinput", "--no-input", "--yes", action="store_false",
                            dest="interactive",
                            help="delete without asking (needed when not on a terminal: cron, "
                                 "CI)")
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
        total = self._describe(jobs, cutoff, dry_run=options["dry_run"])
        if options["dry_run"] or not total:
            return
        if options["interactive"] and not self._confirmed(total):
            self.stdout.write("purge cancelled: nothing deleted")
            return
        progress = Progress(self.stdout, total, verb="deleted")
        deleted = jobs.delete_in_batches(progress=progress.update)
        progress.finish()
        self.stdout.write(self.style.SUCCESS(f"deleted {deleted} job(s)"))

    def _describe(self, jobs, cutoff, *, dry_run: bool) -> int:
        """Print what would go: the counts by status, then by queue. Returns the total."""
        by_queue = {}
        rows = jobs.values_list("queue", "status").annotate(n=Count("pk")).order_by()
        for queue, status, n in rows:
            by_queue.setdefault(queue, {})[status] = n
        by_status = {}
        for counts in by_queue.values():
            for status, n in counts.items():
                by_status[status] = by_status.get(status, 0) + n
        total = sum(by_status.values())
        when = f"finished before {cutoff:%Y-%m-%d %H:%M:%S %Z}"
        if not total:
            self.stdout.write(f"nothing to delete: no job {when}")
            return 0
        verb = "would delete" if dry_run else "will delete"
        self.stdout.write(f"{verb} {total} job(s) {when} ({counts_line(by_status)})")
        largest = sorted(by_queue, key=lambda q: (-sum(by_queue[q].values()), q))
        for queue in largest[:LISTED_QUEUES]:
            self.stdout.write(f"  queue {queue}: {counts_line(by_queue[queue])}")
        rest = largest[LISTED_QUEUES:]
        if rest:
            self.stdout.write(f"  {len(rest)} more queue(s): "
                              f"{sum(sum(by_queue[q].values()) for q in rest)} job(s)")
        return total

    def _confirmed(self, total: int) -> bool:
        """Ask on a terminal; elsewhere refuse, saying what to add: a purge run from cron or CI
        must say it means it."""
        if not sys.stdin.isatty():
            raise CommandError(
                f"not deleting {total} job(s) without a confirmation, and the input is not a "
                "terminal to ask on: add --noinput (or --no-input) to delete without asking, "
                "as a cron job does; --dry-run only counts."
            )
        answer = input(f"Delete these {total} job(s) for good? Type 'yes' to continue, or "
                       "'no' to cancel: ")
        return answer.strip().lower() == "yes"
