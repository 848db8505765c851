"""``python manage.py demo``: a tour of django-sqlqueue on this project's database.

Run ``python manage.py migrate`` first. The scenario is in ``shop/demo.py``.

The jobs are run by a small loop inside this command (claim, run, repeat) because django-sqlqueue
has no worker command yet. When ``manage.py runworker`` exists (a later issue), the demo will start
a real worker instead of this loop.
"""

import logging
import os
import socket

from django.core.management.base import BaseCommand, CommandError

from shop.demo import Demo


class Command(BaseCommand):
    help = "Enqueue one job of every kind, run them all in this process, and explain the outcome."

    def add_arguments(self, parser):
        group = parser.add_mutually_exclusive_group()
        group.add_argument(
            "--fresh", dest="fresh", action="store_true", default=True,
            help="Delete every existing job first (the default: the demo starts clean).",
        )
        group.add_argument(
            "--keep", dest="fresh", action="store_false",
            help="Keep existing jobs; unfinished ones are run along with the demo's.",
        )
        parser.add_argument(
            "--timeout", type=float, default=60.0,
            help="Give up (and exit non-zero) if the jobs are not all finished after this many "
            "seconds (default: 60).",
        )

    def handle(self, *args, fresh, timeout, verbosity, **options):
        # The demo prints one line per job outcome itself; the library's own log lines (one per
        # finished job) are shown with -v 2.
        library_level = logging.INFO if verbosity > 1 else logging.ERROR
        logging.getLogger("django_sqlqueue").setLevel(library_level)
        demo = Demo(self.stdout, self.style)
        if fresh:
            demo.reset()
        orders = demo.place_orders()
        demo.enqueue_more(orders)
        worker_id = f"{socket.gethostname()}:{os.getpid()}:demo"
        if not demo.process(worker_id, timeout):
            raise CommandError(f"the jobs did not all finish within {timeout:g} s.")
        problems = demo.summarize()
        if problems:
            raise CommandError("the demo did not go as expected: " + "; ".join(problems))
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS("Demo finished: every job ended as expected."))
