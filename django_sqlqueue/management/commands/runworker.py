"""``manage.py runworker``: parse options, then hand over to the worker."""

import dataclasses
import functools
import logging
import os
import sys

from django.core.management.base import BaseCommand, CommandError

from ...worker import children
from ...worker.config import InvalidWorkerOption, WorkerConfig
from ...worker.process import RECYCLE_EXIT_CODE, WorkerProcess
from ...worker.supervisor import Supervisor


class Command(BaseCommand):
    help = (
        "Run jobs from the database queue. Stops gracefully on SIGTERM/SIGINT (running jobs "
        "may finish within --shutdown-timeout; the rest go back to the queue)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--queue", "-q", action="append", dest="queues", metavar="Q",
                            help="a queue to work on; repeat for several (default: every queue)")
        parser.add_argument("--concurrency", "-c", type=int, default=8, metavar="N",
                            help="jobs run at once per process, on threads (default 8)")
        parser.add_argument("--processes", "-p", type=int, default=1, metavar="P",
                            help="worker processes under a supervisor that restarts them "
                                 "(default 1: no supervisor)")
        parser.add_argument("--start-method", choices=children.START_METHODS,
                            default=children.default_start_method(),
                            help="how the supervisor starts worker processes: fork itself "
                                 "(fast, the default on Linux) or spawn fresh interpreters")
        parser.add_argument("--burst", action="store_true",
                            help="exit 0 once no job is ready or due within a poll interval")
        parser.add_argument("--max-jobs", type=int, metavar="N",
                            help="recycle the process after N jobs")
        parser.add_argument("--max-memory", type=float, metavar="MB",
                            help="recycle the process when its resident memory passes MB")
        parser.add_argument("--poll-interval", type=float, metavar="S",
                            help="seconds between polls (default SQLQUEUE POLL_INTERVAL_SECONDS)")
        parser.add_argument("--shutdown-timeout", type=float, default=30.0, metavar="S",
                            help="on SIGTERM, seconds running jobs may take to finish "
                                 "(default 30)")
        parser.add_argument("--name", help="worker name prefix (default: the host name)")
        parser.add_argument("--database", help="alias of the jobs database (default: router)")
        parser.add_argument("--supervised", action="store_true", help=argparse_suppress())

    def handle(self, *args, **options):
        self._configure_logging(options["verbosity"])
        try:
            config = WorkerConfig(
                queues=options["queues"], concurrency=options["concurrency"],
                processes=options["processes"], burst=options["burst"],
                max_jobs=options["max_jobs"], max_memory_mb=options["max_memory"],
                poll_interval=options["poll_interval"],
                shutdown_timeout=options["shutdown_timeout"], name=options["name"],
                database=options["database"], supervised=options["supervised"],
            )
        except InvalidWorkerOption as exc:
            raise CommandError(str(exc)) from None
        if config.processes > 1 and not config.supervised:
            sys.exit(self._supervise(config, options["start_method"]))
        code = WorkerProcess(config, out=self.stdout).run()
        if code == RECYCLE_EXIT_CODE and not config.supervised:
            # No supervisor to restart us: replace this process with a fresh one (same pid).
            self.stdout.flush()
            os.execv(sys.executable, _this_command())
        sys.exit(code)

    def _supervise(self, config, start_method) -> int:
        if start_method == "fork":
            blocker = children.fork_blocker()
            if blocker:
                self.stderr.write(f"supervisor: cannot fork safely: {blocker}; starting fresh "
                                  "interpreters instead (--start-method spawn)")
                start_method = "spawn"
        if start_method == "fork":
            child_config = dataclasses.replace(config, processes=1, supervised=True)

            def run_child():
                return WorkerProcess(child_config, out=self.stdout).run()

            start_child = functools.partial(children.fork, run_child)
        else:
            argv = [*_this_command(), "--processes", "1", "--supervised"]
            start_child = functools.partial(children.spawn, argv)
        return Supervisor(processes=config.processes, start_child=start_child,
                          start_method=start_method, burst=config.burst,
                          shutdown_timeout=config.shutdown_timeout, out=self.stdout).run()

    def _configure_logging(self, verbosity):
        """Print the worker's key=value lines unless the project configured these loggers."""
        logger = logging.getLogger("django_sqlqueue")
        if logger.handlers or verbosity == 0:
            return
        handler = logging.StreamHandler(self.stdout)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
        logger.propagate = False


def _this_command() -> list:
    """The command line that started this process (``python -m django ...`` included)."""
    return [sys.executable, *sys.orig_argv[1:]]


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS
