"""``manage.py healthcheck live|ready``: an orchestrator's liveness or readiness probe
(worker/health.py says what each checks; docs/operations.md has the probes)."""

import json
import sys

from django.core.management.base import BaseCommand

from ...models import Job
from ...worker import health
from ..database_option import add_database_option, database_alias

#: The exit codes, as docs/operations.md lists them (2 is argparse's, for a wrong command line).
EXIT_CODES = {health.HEALTHY: 0, health.UNHEALTHY: 1, health.UNKNOWN: 0}


class Command(BaseCommand):
    help = (
        "Answer a liveness probe (live: this host's workers beat within their lease) or a "
        "readiness probe (ready: the jobs database answers and is migrated, and with "
        "SQLQUEUE['VERSION'] set, this host's workers run that version). Exit code 0: "
        "healthy (live: also unknown, while the database does not answer); 1: unhealthy; 2: "
        "a wrong command line."
    )
    requires_system_checks = []  # a probe runs often and must be quick; runworker checks

    def add_arguments(self, parser):
        parser.add_argument("probe", choices=[health.LIVE, health.READY])
        parser.add_argument("--name", metavar="NAME",
                            help="the workers started with runworker --name NAME (default: "
                                 "every worker of this host)")
        parser.add_argument("--json", action="store_true",
                            help="print the answer as one JSON document")
        add_database_option(parser)

    def handle(self, *args, **options):
        alias = database_alias(options, Job)
        if options["probe"] == health.LIVE:
            report = health.liveness(alias, name_prefix=options["name"])
        else:
            report = health.readiness(alias, name_prefix=options["name"])
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict()))
        else:
            self.stdout.write(f"{report.probe}: {report.status}")
            for problem in report.problems:
                self.stdout.write(f"  {problem}")
        self.stdout.flush()
        sys.exit(EXIT_CODES[report.status])
