"""``manage.py tablehealth``: the size of this app's tables and indexes, their dead rows and
last vacuum, what holds vacuum back, and what to do about it (``observability/table_health``).
It reads catalogs and statistics only: it changes nothing and takes no lock that matters."""

import json

from django.core.management.base import BaseCommand, CommandError

from ...models import Job
from ...observability import table_health
from ..database_option import add_database_option, database_alias

MIB = table_health.MIB


class Command(BaseCommand):
    help = ("Report the health of the job tables: size, dead rows, last vacuum, index sizes "
            "against their packed size, the transactions that hold vacuum back, and the "
            "statement that mends each thing found. Changes nothing.")

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true",
                            help="print a JSON document (docs/scaling.md gives its fields)")
        parser.add_argument(
            "--max-transaction-seconds", type=float, default=table_health.TRANSACTION_SECONDS,
            metavar="SECONDS",
            help="advise ending a transaction open this long that holds vacuum back (default "
                 f"{table_health.TRANSACTION_SECONDS})")
        add_database_option(parser)

    def handle(self, *args, **options):
        alias = database_alias(options, Job)
        seconds = options["max_transaction_seconds"]
        if not seconds >= 0:
            raise CommandError("--max-transaction-seconds takes a number of seconds, 0 or "
                               f"more, not {seconds:g} (for example 300).")
        report = table_health.read(alias, transaction_seconds=seconds)
        if report is None:
            raise CommandError(f"the database {alias!r} has no table health report: "
                               "PostgreSQL, MariaDB and SQLite have one.")
        if options["json"]:
            self.stdout.write(json.dumps(report.as_json(), default=str))
            return
        for line in lines(report):
            self.stdout.write(line)


def lines(report) -> list:
    health = report.health
    out = [f"{'TABLE / INDEX':52} {'SIZE':>9} {'LIVE ROWS':>11} {'DEAD ROWS':>10}  "
           "LAST VACUUM"]
    for table in health.tables:
        # Dead rows and vacuum go together: a database that counts none has no vacuum to time.
        vacuumed = "-" if table.dead_rows is None else _when(table.last_vacuum)
        out.append(f"{table.name:52} {_size(table.bytes + table.index_bytes):>9} "
                   f"{_count(table.live_rows):>11} {_count(table.dead_rows):>10}  {vacuumed}")
        for index in table.indexes:
            bloat = f"  {index.bloat:.1f}x packed" if index.bloat is not None else ""
            out.append(f"  {index.name:50} {_size(index.bytes):>9}{bloat}")
    for name, value in health.facts.items():
        text = ", ".join(value) if isinstance(value, list) else (
            _size(value) if name.endswith("_bytes") else f"{value:,}")
        out.append(f"{name.replace('_', ' ')}: {text}")
    if health.holders:
        out.append("Holding vacuum back (the oldest first):")
        out += [f"  {holder.kind} {holder.ident}: "
                f"{'-' if holder.seconds is None else f'{holder.seconds:.0f} s'}, {holder.detail}"
                for holder in health.holders]
    out += [f"To do: {line}" for line in report.advice] or ["Nothing to do."]
    return out


def _size(size) -> str:
    for unit, scale in (("GiB", 1024 * MIB), ("MiB", MIB)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size / 1024:.0f} KiB"


def _count(value) -> str:
    return "-" if value is None else f"{value:,}"


def _when(moment) -> str:
    return "never" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S %Z").strip()
