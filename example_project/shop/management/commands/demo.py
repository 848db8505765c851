"""``python manage.py demo``: a tour of django-sqlqueue on this project's database.

Run ``python manage.py migrate`` first. The scenario is in ``shop/demo.py``: this command enqueues
its jobs, runs ``manage.py runworker --burst`` in a subprocess to process them, and explains what
happened.
"""

from django.core.management.base import BaseCommand, CommandError

from shop.demo import WORKER_OPTIONS, Demo


class Command(BaseCommand):
    help = (
        "Enqueue one job of every kind, run them with `runworker --burst` in a subprocess, and "
        "explain the outcome."
    )

    def add_arguments(self, parser):
        group = parser.add_mutually_exclusive_group()
        group.add_argument(
            "--fresh", dest="fresh", action="store_true", default=True,
            help="Delete every existing job first (the default: the demo starts clean).",
        )
        group.add_argument(
            "--keep", dest="fresh", action="store_false",
            help="Keep existing jobs; the worker runs the unfinished ones along with the demo's.",
        )
        parser.add_argument(
            "--timeout", type=float, default=60.0,
            help="Stop the worker (and exit non-zero) if it has not drained the queue after this "
            "many seconds (default: 60).",
        )

    def handle(self, *args, fresh, timeout, verbosity, **options):
        demo = Demo(self.stdout, self.style)
        if fresh:
            demo.reset()
        orders = demo.place_orders()
        demo.enqueue_more(orders)
        demo.show_schedules()
        try:
            code = demo.run_worker(timeout, verbosity)
        except KeyboardInterrupt:
            raise CommandError("interrupted; the worker put its unstarted jobs back.") from None
        if demo.timed_out:
            raise CommandError(f"the worker had not drained the queue after {timeout:g} s.")
        if code != 0:
            raise CommandError(
                f"`manage.py runworker {' '.join(WORKER_OPTIONS)}` exited with code {code}; "
                "its output is above."
            )
        left = demo.unfinished()
        if left:
            raise CommandError(
                f"the worker exited but left {len(left)} of the demo's jobs unfinished: "
                + ", ".join(f"{job} (run_at {job.run_at:%H:%M:%S})" for job in left)
            )
        problems = demo.summarize()
        if problems:
            raise CommandError("the demo did not go as expected: " + "; ".join(problems))
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS("Demo finished: every job ended as expected."))
        self.stdout.write(
            "\nSee the jobs, their attempts and tracebacks in the admin (from example_project/):\n"
            "  ../.venv/bin/python manage.py createsuperuser\n"
            "  ../.venv/bin/python manage.py runserver\n"
            "  then open http://127.0.0.1:8000/admin/django_sqlqueue/\n"
            "or in this terminal: ../.venv/bin/python manage.py stats"
        )
