"""``manage.py schedules``: list the periodic schedules; sync, pause, resume or run one now."""

import datetime as dt
import json

from django.core.management.base import BaseCommand, CommandError

from ...models import Schedule
from ...schedules import operations
from ...schedules.declare import declared
from ..database_option import add_database_option, database_alias

#: What a listed next run waits for, by state.
AFTER = {"paused": " (once resumed)", "not synced": " (once synced)"}
COLUMNS = (("name", "NAME"), ("state", "STATE"), ("description", "WHEN"),
           ("zone", "TIME ZONE"), ("next", "NEXT RUN"), ("last", "LAST RUN"))


class Command(BaseCommand):
    help = (
        "List the periodic schedules (@schedule): when each runs next, its last run and how it "
        "went. --sync copies the declarations of this code into the table, as a starting "
        "worker does; --pause, --resume and --run-now act on one schedule."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true",
                            help="print a JSON list, with the next five runs of each")
        parser.add_argument("--all", action="store_true",
                            help="also list retired schedules (no longer in the code)")
        parser.add_argument("--sync", action="store_true",
                            help="sync the declarations of this code first, as workers do "
                                 "when they start")
        for option, what in (("--pause", "pause"), ("--resume", "resume"),
                             ("--run-now", "enqueue one job of")):
            parser.add_argument(option, action="append", default=[], metavar="NAME",
                                help=f"{what} this schedule; repeat for several")
        add_database_option(parser)

    def handle(self, *args, **options):
        alias = database_alias(options, Schedule)
        rows = Schedule.objects.using(alias)
        if options["sync"]:
            result = operations.sync(alias)
            self.stderr.write(f"synced: {result.summary()}")
        by = "manage.py schedules"
        for name in options["pause"]:
            done = operations.pause(rows.filter(name=self._known(rows, name).name), by=by)
            self.stderr.write(f"{name}: {'paused' if done else 'not active: left as it was'}")
        for name in options["resume"]:
            done = operations.resume(rows.filter(name=self._known(rows, name).name))
            self.stderr.write(f"{name}: {'resumed' if done else 'not paused: left as it was'}")
        for name in options["run_now"]:
            try:
                job = operations.run_now(self._known(rows, name), by=by, alias=alias)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            self.stderr.write(f"{name}: enqueued job #{job.pk}")
        listed = rows.all() if options["all"] else rows.current()
        now = operations.database_now(alias)
        # Declared here but not in the table yet (no worker started since): listed as such.
        pending = [] if options["sync"] else operations.unsynced(alias, now=now)
        summaries = operations.summaries(listed, now=now, pending=pending)
        if options["json"]:
            self.stdout.write(json.dumps(summaries, indent=2))
        else:
            self.stdout.write(table(summaries) if summaries else
                              "no schedules: declare them with @schedule in a tasks.py, and "
                              "start a worker (or run manage.py schedules --sync)")
            if pending:
                self.stderr.write(
                    f"{len(pending)} schedule(s) declared in this code are not synced yet: a "
                    "worker syncs them when it starts (or run manage.py schedules --sync); "
                    "until then they do not run.")

    def _known(self, rows, name):
        row = rows.filter(name=name).first()
        if row is None:
            if any(spec.name == name for spec in declared()):
                raise CommandError(f"schedule {name!r} is declared but not synced yet: run "
                                   "manage.py schedules --sync first (a starting worker "
                                   "syncs too).")
            names = ", ".join(rows.values_list("name", flat=True)) or "none"
            raise CommandError(f"no schedule named {name!r} (schedules: {names}).")
        return row


def table(summaries) -> str:
    """Aligned columns; a schedule's last run reads ``<time> succeeded (#42)``."""
    lines = []
    for item in summaries:
        last = "never"
        if item["last_job"]:
            last = (f"{short(item['last_run_at'])} {item['last_job']['status']} "
                    f"(#{item['last_job']['id']})")
        lines.append({
            "name": item["name"], "state": item["state"], "description": item["description"],
            "zone": item["timezone"] or "-",
            "next": "-" if item["state"] == "retired" or not item["next_runs"]
            else short(item["next_runs"][0]) + AFTER.get(item["state"], ""),
            "last": last,
        })
    widths = {key: max(len(title), *(len(line[key]) for line in lines))
              for key, title in COLUMNS}
    out = ["  ".join(title.ljust(widths[key]) for key, title in COLUMNS).rstrip()]
    for line in lines:
        out.append("  ".join(line[key].ljust(widths[key]) for key, _ in COLUMNS).rstrip())
    return "\n".join(out)


def short(iso: str) -> str:
    """``2026-01-31T03:00:00.714+01:00`` -> ``2026-01-31 03:00:00+01:00``."""
    return dt.datetime.fromisoformat(iso).replace(microsecond=0).isoformat(sep=" ")
