"""``manage.py stats``: per queue, jobs by state, lag, throughput of the last minutes and live
workers; ``--watch`` refreshes, ``--json`` prints the document scripts read; ``--job ID`` shows
one job's status and latest progress instead."""

import contextlib
import json
import signal
import sys
import threading
import time

from django.core.management.base import BaseCommand, CommandError

from ...conf import get_settings
from ...models import Job
from ...observability import fleet, snapshot
from ..database_option import add_database_option, database_alias
from ..stats_text import COLUMNS, job_json, job_line, lines, tagged_json, tagged_lines

#: A terminal's "cursor home, clear to the end": each refresh draws over the last one.
REDRAW = "\x1b[H\x1b[J"
DEFAULT_WATCH_SECONDS = 2.0


class Stop:
    """What Ctrl-C sets (``ctrl_c_sets``): a plain flag, and a wait that sleeps in short steps
    until it is set. Not a ``threading.Event``: its ``set()`` takes the lock that its
    ``wait()`` holds for a moment, and a signal's handler runs in the main thread, so a Ctrl-C
    that landed inside ``wait()`` set it from under that lock and hung for ever (seen in CI)."""

    STEP_SECONDS = 0.05  # how soon a wait ends once set

    def __init__(self):
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        """Sleep until set or for ``timeout`` seconds; whether it was set."""
        deadline = time.monotonic() + timeout
        while not self._set:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, self.STEP_SECONDS))
        return True


@contextlib.contextmanager
def ctrl_c_sets():
    """A ``Stop`` that Ctrl-C (SIGINT) sets, for the time of the block; a second Ctrl-C raises
    KeyboardInterrupt as usual (a query that hangs can still be left).

    Not KeyboardInterrupt alone: Python raises it wherever the main thread happens to be when
    the signal arrives, and raised inside a finalizer (a model instance's ``__del__``, run by
    the garbage collector in the middle of building a query) it is printed as "Exception
    ignored" and lost: ``--watch`` went on redrawing after its Ctrl-C (seen in CI)."""
    stopped = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stopped  # signal handlers belong to the main thread: Ctrl-C stays as it was
        return

    def handle(signum, frame):
        if stopped.is_set():
            raise KeyboardInterrupt
        stopped.set()

    previous = signal.signal(signal.SIGINT, handle)
    try:
        yield stopped
    finally:  # (None: a handler not set from Python; Python's own is the nearest)
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None
                      else previous)


class Command(BaseCommand):
    help = (
        "Show each queue now: jobs queued (due), scheduled, running, retrying and exhausted, "
        "lag, jobs done per minute over the last 5 minutes and in the last hour, and live "
        "workers. Columns: " + "; ".join(f"{h}: {what}" for h, what in COLUMNS) + "."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--watch", nargs="?", type=float, const=DEFAULT_WATCH_SECONDS, metavar="SECONDS",
            help=f"refresh every SECONDS (default {DEFAULT_WATCH_SECONDS:g}) until Ctrl-C: in "
                 "place on a terminal, else one table (or JSON line) after another")
        parser.add_argument("--json", action="store_true",
                            help="print a JSON document (one per line with --watch); its "
                                 "schema is in docs/observability.md")
        parser.add_argument("--tag", action="append", metavar="TAG",
                            help="only the jobs with this tag, per queue by status (repeat for "
                                 "jobs with every one of them)")
        parser.add_argument("--job", type=int, metavar="ID",
                            help="only this job: its status and latest progress (with --watch, "
                                 "followed until it finishes)")
        add_database_option(parser)

    def handle(self, *args, **options):
        # --database, else SQLQUEUE["READ_DATABASE"] (a replica), else the jobs database.
        alias = database_alias(
            {**options, "database": options["database"] or get_settings().READ_DATABASE}, Job)
        every = options["watch"]
        if every is not None and not every > 0:
            raise CommandError(f"--watch takes a number of seconds more than 0, not {every:g} "
                               f"(for example --watch {DEFAULT_WATCH_SECONDS:g}).")
        tags = options["tag"]
        if tags and not all(tag.strip() for tag in tags):
            raise CommandError("--tag takes a tag, e.g. --tag billing.")
        if options["job"] is not None and tags:
            raise CommandError("--job and --tag do not go together: pass one of them.")
        in_place = every is not None and not options["json"] and self._on_terminal()
        with ctrl_c_sets() as stopped:
            while True:
                if options["job"] is not None:
                    if self._show_job(alias, options["job"], options["json"], in_place):
                        return  # finished: nothing more to follow
                elif tags:
                    self._show_tagged(alias, tags, options["json"], in_place)
                else:
                    self._show(alias, options["json"], in_place)
                if every is None or stopped.wait(every):
                    break
        if stopped.is_set() and not options["json"]:  # Ctrl-C ended --watch: not an error
            self.stdout.write("")

    def _show(self, alias, as_json, in_place):
        snap = snapshot.take(alias=alias)
        if as_json:
            document = snap.as_json()
            document["autoscale"] = fleet.measure(alias).as_json()  # docs/autoscaling.md
            self.stdout.write(json.dumps(document))
        else:
            text = "\n".join(lines(snap))
            self.stdout.write(REDRAW + text if in_place else text + "\n")
        self.stdout.flush()

    def _show_tagged(self, alias, tags, as_json, in_place):
        stats = Job.objects.using(alias).tagged(*tags).stats()
        if as_json:
            self.stdout.write(json.dumps(tagged_json(tags, stats)))
        else:
            text = "\n".join(tagged_lines(tags, stats))
            self.stdout.write(REDRAW + text if in_place else text + "\n")
        self.stdout.flush()

    def _show_job(self, alias, job_id, as_json, in_place) -> bool:
        """Print the job's line; True once it has finished."""
        job = Job.objects.using(alias).filter(pk=job_id).first()
        if job is None:
            raise CommandError(f"There is no job {job_id} (in the database {alias!r}).")
        text = json.dumps(job_json(job)) if as_json else job_line(job)
        self.stdout.write(REDRAW + text if in_place else text + ("" if as_json else "\n"))
        self.stdout.flush()
        return job.is_finished

    def _on_terminal(self) -> bool:
        stream = getattr(self.stdout, "_out", sys.stdout)
        return hasattr(stream, "isatty") and stream.isatty()
