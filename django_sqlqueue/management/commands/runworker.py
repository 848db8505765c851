"""``manage.py runworker``: parse options, then hand over to the worker."""

import dataclasses
import functools
import logging
import os
import sys

from django.core.management.base import BaseCommand, CommandError
from django.db import router

from ... import checks
from ...models import Job
from ...queues import control
from ...worker import children, log_format
from ...worker.config import InvalidWorkerOption, WorkerConfig
from ...worker.job_threads import PoolStartError
from ...worker.process import RECYCLE_EXIT_CODE, WorkerProcess
from ...worker.resilience import call_with_retry
from ..queue_names import did_you_mean, queues_of_registered_tasks


class Command(BaseCommand):
    help = (
        "Run jobs from the database queue. Stops gracefully on SIGTERM/SIGINT (running jobs "
        "may finish within --shutdown-timeout; the rest go back to the queue)."
    )

    def check(self, *args, **kwargs):
        """Django's system checks, run before ``handle``, retried while a database is out of
        reach: on MariaDB they connect to every database (the MySQL backend's field checks read
        the server's version), and a worker started during a database restart, as a supervisor
        or an orchestrator starts one after a crash, exited with a traceback instead of
        waiting for the database as it does everywhere else."""
        return call_with_retry(lambda: super(Command, self).check(*args, **kwargs),
                               alias=router.db_for_write(Job),
                               what="running Django's system checks")

    def add_arguments(self, parser):
        parser.add_argument("--queue", "-q", action="append", dest="queues", metavar="Q",
                            help="a queue to work on; repeat for several (default: every queue)")
        parser.add_argument("--concurrency", "-c", type=int, default=8, metavar="N",
                            help="jobs run at once per process, on threads (default 8)")
        parser.add_argument("--async-concurrency", type=int, metavar="N",
                            help="async jobs run at once per process on its event loop, beside "
                                 "the threads (default SQLQUEUE ASYNC_CONCURRENCY, 100; 0: "
                                 "async jobs run on the threads)")
        parser.add_argument("--processes", "-p", type=int, metavar="P",
                            help="worker processes under a supervisor that restarts them "
                                 "(default 1: no supervisor)")
        parser.add_argument("--autoscale", metavar="MIN:MAX",
                            help="between MIN and MAX worker processes under a supervisor, "
                                 "more while jobs wait past AUTOSCALE_TARGET_WAIT_SECONDS, one "
                                 "fewer after AUTOSCALE_COOLDOWN_SECONDS of idle slots (see "
                                 "docs/autoscaling.md); not with --processes")
        parser.add_argument("--start-method", choices=children.START_METHODS,
                            default=children.default_start_method(),
                            help="how the supervisor starts worker processes: fork itself "
                                 "(fast, the default on Linux) or spawn fresh interpreters")
        parser.add_argument("--burst", action="store_true",
                            help="exit 0 once no job is ready or due within a poll interval "
                                 "(a thread stuck in a job past its time limit is abandoned)")
        parser.add_argument("--max-jobs", type=int, metavar="N",
                            help="recycle the process after N jobs")
        parser.add_argument("--transactional-batch", type=int, default=0, metavar="N",
                            help="run transactional jobs in a lane of their own, N per "
                                 "transaction (default 0: no lane, they are claimed as any job)")
        parser.add_argument("--transactional-lanes", type=int, default=1, metavar="N",
                            help="with --transactional-batch: lanes per process, each a thread "
                                 "with its own connection and transaction (default 1)")
        parser.add_argument("--max-memory", type=float, metavar="MB",
                            help="recycle the process when its resident memory passes MB")
        parser.add_argument("--poll-interval", type=float, metavar="S",
                            help="seconds between polls (default SQLQUEUE POLL_INTERVAL_SECONDS)")
        parser.add_argument("--shutdown-timeout", type=float, default=30.0, metavar="S",
                            help="on SIGTERM, seconds running jobs may take to finish "
                                 "(default 30)")
        parser.add_argument("--name", help="worker name prefix (default: the host name)")
        parser.add_argument("--database", help="alias of the jobs database (default: router)")
        parser.add_argument("--no-scheduler", action="store_true",
                            help="neither sync the @schedule declarations of this code nor "
                                 "enqueue due ticks (other workers do)")
        parser.add_argument("--metrics-port", type=int, metavar="PORT",
                            help="serve Prometheus metrics on http://ADDRESS:PORT/metrics (0: "
                                 "any free port); with --processes, the supervisor serves them "
                                 "all. Needs the [prometheus] extra")
        parser.add_argument("--metrics-address", default="0.0.0.0", metavar="ADDRESS",
                            help="the interface --metrics-port listens on (default 0.0.0.0)")
        parser.add_argument("--log-format", choices=log_format.FORMATS, default="text",
                            help="text for people (default); keyvalue or json: every line the "
                                 "worker writes is one key=value or JSON line with stable keys")
        parser.add_argument("--supervised", action="store_true", help=argparse_suppress())

    def handle(self, *args, **options):
        self._configure_logging(options["verbosity"], options["log_format"])
        try:
            config = WorkerConfig(
                queues=options["queues"], concurrency=options["concurrency"],
                async_concurrency=options["async_concurrency"],
                processes=options["processes"], autoscale=options["autoscale"],
                burst=options["burst"],
                max_jobs=options["max_jobs"], max_memory_mb=options["max_memory"],
                transactional_batch=options["transactional_batch"],
                transactional_lanes=options["transactional_lanes"],
                poll_interval=options["poll_interval"],
                shutdown_timeout=options["shutdown_timeout"], name=options["name"],
                database=options["database"], supervised=options["supervised"],
                scheduler=not options["no_scheduler"], metrics_port=options["metrics_port"],
                metrics_address=options["metrics_address"], log_format=options["log_format"],
            )
        except InvalidWorkerOption as exc:
            raise CommandError(str(exc)) from None
        if not config.supervised:  # a supervisor's children: it checked already
            alias = config.database or router.db_for_write(Job)
            self._require_migrations(alias)
            if config.queues:
                self._warn_about_queues_no_task_uses(config.queues, alias)
        # The supervisor's, or the only process's; a supervised child never serves.
        export = None if config.supervised else self._export_metrics(config)
        try:
            if (config.processes > 1 or config.autoscale_range) and not config.supervised:
                sys.exit(self._supervise(config, options["start_method"], export))
            try:
                code = WorkerProcess(config, out=self.stdout).run()
            except PoolStartError as exc:
                raise CommandError(str(exc)) from None
        finally:
            if export is not None:
                export.close()
        if code == RECYCLE_EXIT_CODE and not config.supervised:
            # No supervisor to restart us: replace this process with a fresh one (same pid).
            self.stdout.flush()
            _close_on_exec()
            os.execv(sys.executable, _this_command())
        sys.exit(code)

    def _require_migrations(self, alias):
        """A database without the tables (``migrate`` forgotten): one line that says so, at once,
        rather than a worker that retries a missing table or dies of it with a traceback."""
        problem = call_with_retry(functools.partial(checks.migrations_problem, alias),
                                  alias=alias, what="reading the applied migrations")
        if problem is not None:
            raise CommandError(problem[0].upper() + problem[1:])

    def _warn_about_queues_no_task_uses(self, queues, alias):
        """A typo in -q would otherwise idle without a word."""
        used = queues_of_registered_tasks()
        if used is None:
            return  # a django.tasks backend here accepts any queue name
        unused = [queue for queue in queues if queue not in used]
        if not unused:
            return
        known = used | call_with_retry(functools.partial(control.known_names, using=alias),
                                       alias=alias, what="reading the queue names")
        for queue in unused:
            if queue in known:
                continue  # jobs or a Queue row name it: enqueued with queue=...
            guess = did_you_mean(queue, known)
            self.stderr.write(
                f"warning: no registered task uses queue {queue!r}{guess} and no job waits in "
                f"it (their queues: {', '.join(sorted(known)) or 'none'}); this worker serves "
                f"it anyway, for jobs enqueued with queue={queue!r}."
            )

    def _export_metrics(self, config):
        """The metrics endpoint of --metrics-port (a MetricsExport), or None."""
        if config.metrics_port is None:
            return None
        # Imported here, as the supervisor and the scaler below: a worker without the option
        # (and a single process) does not load them at its start.
        from ...worker.metrics_export import MetricsExport

        export = MetricsExport(port=config.metrics_port, address=config.metrics_address,
                               processes=config.autoscale_range[1] if config.autoscale_range
                               else config.processes)
        try:
            self.stdout.write(export.start())
        except OSError as exc:
            export.close()
            raise CommandError(f"--metrics-port {config.metrics_port}: cannot listen on "
                               f"{config.metrics_address}:{config.metrics_port} ({exc}); pick "
                               "a free port") from None
        return export

    def _supervise(self, config, start_method, export) -> int:
        from ...worker.scaler import Scaler
        from ...worker.supervisor import Supervisor

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
        serving = {} if export is None else {"idle": export.serve,
                                             "on_child_exited": export.child_exited}
        return Supervisor(processes=config.processes, start_child=start_child,
                          start_method=start_method, burst=config.burst,
                          shutdown_timeout=config.shutdown_timeout, out=self.stdout,
                          log_format=config.log_format, scaler=Scaler.for_config(config),
                          **serving).run()

    def _configure_logging(self, verbosity, line_format):
        """Print the worker's log lines unless the project configured these loggers; with
        --log-format keyvalue/json, the handlers the project gave them write that format."""
        logger = logging.getLogger("django_sqlqueue")
        if verbosity == 0:
            return
        formatter = log_format.Formatter(line_format)
        if logger.handlers:
            if line_format != "text":
                for handler in logger.handlers:
                    handler.setFormatter(formatter)
            return
        handler = logging.StreamHandler(self.stdout)
        handler.setFormatter(formatter)
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
        logger.propagate = False


def _this_command() -> list:
    """The command line that started this process (``python -m django ...`` included)."""
    return [sys.executable, *sys.orig_argv[1:]]


def _close_on_exec() -> None:
    """Mark every file descriptor past stderr close-on-exec, so that the fresh process does not
    inherit this one's database connections. Python's own sockets are, but a driver's C library
    may open its socket without the flag (mysqlclient's does; libpq's and SQLite's set it). An
    inherited connection is never used nor closed: the server keeps its session, and a thread
    caught mid-transaction by the exec keeps its row locks until the server's wait_timeout
    (hours): the next process skipped those jobs, and its pruning waited for their locks."""
    try:
        descriptors = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc (macOS, BSD): every number up to the limit
        descriptors = range(3, min(os.sysconf("SC_OPEN_MAX"), 65536))
    for fd in descriptors:
        if fd > 2:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                pass  # closed meanwhile (the listing's own descriptor among them)


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS
