"""``manage.py queues``: list the queues (paused, limits, what their jobs wait for); pause,
resume, limit one or make it fair (queues/control.py does the work)."""

import json
from dataclasses import asdict

from django.core.management.base import BaseCommand, CommandError

from ...enqueue.validation import queue_name
from ...exceptions import InvalidJob, InvalidQueueLimit
from ...models import Queue
from ...queues import control
from ..database_option import add_database_option, database_alias
from ..queue_names import did_you_mean, known_queues

LIMIT_OPTIONS = (
    ("--concurrency", "concurrency_limit", "running jobs of the queue at once"),
    ("--rate", "rate_limit", "starts of the queue per --period"),
    ("--key-concurrency", "key_concurrency_limit", "running jobs at once per concurrency_key"),
    ("--key-rate", "key_rate_limit", "starts per --period per concurrency_key"),
)


def limit_value(text):
    """A whole number, or "none" for no limit."""
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise CommandError(f"a limit is a whole number or 'none', not {text!r}.") from None


def key_weight(text):
    """KEY=N: a concurrency key and its weight ("none" is the jobs without a key)."""
    key, sep, weight = text.rpartition("=")
    try:
        value = float(weight)
    except ValueError:
        value = None
    if not sep or value is None:
        raise CommandError(f"a weight is KEY=N, e.g. --weight gold=3, not {text!r}.")
    return ("" if key == "none" else key), value


class Command(BaseCommand):
    help = (
        "List the queues: paused or not, their limits, running and ready jobs, and what the "
        "ready ones wait for. 'queues pause NAME', 'queues resume NAME', 'queues limit NAME "
        "--concurrency 5' and 'queues fair NAME --weight gold=3' change one; every worker "
        "follows within one poll interval. A name that nothing uses (no jobs, no task, no "
        "settings) is refused as a typo unless --create is given."
    )

    def add_arguments(self, parser):
        add_database_option(parser)
        parser.add_argument("--json", action="store_true", help="print a JSON list")
        actions = parser.add_subparsers(dest="action", metavar="ACTION")
        for name, what in (("pause", "stop claiming jobs of these queues (running jobs "
                                     "finish, enqueue goes on)"),
                           ("resume", "claim jobs of these queues again")):
            action = actions.add_parser(name, help=what)
            action.add_argument("names", nargs="+", metavar="QUEUE")
            if name == "pause":
                add_create_option(action)
        limit = actions.add_parser("limit", help="set limits of a queue ('none' removes one)")
        limit.add_argument("names", nargs=1, metavar="QUEUE")
        add_create_option(limit)
        for option, dest, what in LIMIT_OPTIONS:
            limit.add_argument(option, dest=dest, type=limit_value, metavar="N|none",
                               default=argparse_unset, help=what)
        limit.add_argument("--period", dest="rate_period_seconds", type=float, metavar="SECONDS",
                           default=argparse_unset, help="the rate limits' period (default 1)")
        fair = actions.add_parser(
            "fair", help="share the claims of a queue between its concurrency keys (--off: stop)")
        fair.add_argument("names", nargs=1, metavar="QUEUE")
        add_create_option(fair)
        fair.add_argument("--off", action="store_true", help="claim the queue in plain order")
        fair.add_argument("--weight", dest="weights", action="append", type=key_weight,
                          metavar="KEY=N", help="a key's weight (1 if not given; repeat for more "
                          "keys; 'none=N' for the jobs without a key); replaces the weights")
        fair.add_argument("--no-weights", action="store_true", help="remove every weight")

    def handle(self, *args, **options):
        alias = database_alias(options, Queue)
        action = options.get("action")
        try:
            if action in ("pause", "limit", "fair") and not options["create"]:
                self._refuse_unknown(options["names"], action, alias)
            if action == "pause":
                for name in options["names"]:
                    row = control.pause(name, by="manage.py queues", using=alias)
                    self.stderr.write(f"{name}: paused since {row.paused_at:%Y-%m-%d %H:%M:%S}"
                                      f"{f' by {row.paused_by}' if row.paused_by else ''}")
            elif action == "resume":
                for name in options["names"]:
                    row = control.resume(name, using=alias)
                    self.stderr.write(f"{name}: {'resumed' if row else 'was not paused'}")
            elif action == "limit":
                limits = {dest: options[dest] for dest in
                          [dest for _, dest, _ in LIMIT_OPTIONS] + ["rate_period_seconds"]
                          if options.get(dest) is not argparse_unset}
                if not limits:
                    raise CommandError("give at least one limit, e.g. --concurrency 5 or "
                                       "--rate 100 --period 60 ('none' removes one).")
                row = control.set_limits(options["names"][0], using=alias, **limits)
                self.stderr.write(f"{row.name}: limits {row.describe_limits()}")
            elif action == "fair":
                weights = {} if options["no_weights"] else options["weights"]
                if weights is not None:
                    weights = dict(weights)
                row = control.set_fair(options["names"][0], not options["off"],
                                       weights=weights, using=alias)
                self.stderr.write(f"{row.name}: limits {row.describe_limits()}")
        except (InvalidJob, InvalidQueueLimit) as exc:
            raise CommandError(str(exc)) from None
        states = control.states(using=alias)
        if options["json"]:
            self.stdout.write(json.dumps([asdict(state) for state in states], indent=2))
        elif not states:
            self.stdout.write("no queues: no jobs are ready or running, and none is configured")
        else:
            self.stdout.write(table(states))


    def _refuse_unknown(self, names, action, alias):
        """A typo would create a queue of its own (a row, paused or limited) and change nothing
        else: a name nothing uses is refused unless --create says it is meant."""
        known = known_queues(alias)
        unknown = [name for name in names if queue_name(name) not in known]
        if unknown:
            hints = "".join(did_you_mean(name, known) for name in unknown[:1])
            raise CommandError(
                f"no queue named {', '.join(map(repr, unknown))}{hints}: no job is ready or "
                "running in it, no registered task or backend uses it, and it has no settings "
                f"(queues: {', '.join(sorted(known)) or 'none'}). Check the name, or add "
                f"--create to {action} it before its first job.")


def add_create_option(parser):
    parser.add_argument("--create", action="store_true",
                        help="act on a queue nothing uses yet (otherwise refused as a typo)")


argparse_unset = object()  # an option not given (None means "no limit")


def table(states) -> str:
    rows = [("QUEUE", "STATE", "LIMITS", "RUNNING", "READY", "WAITING ON")]
    for state in states:
        waiting = list(state.waiting_on)
        if state.keys_at_limit:
            keys = ", ".join(sorted(state.keys_at_limit)[:5])
            more = len(state.keys_at_limit) - 5
            waiting.append(f"keys at their limit: {keys}{f' (+{more})' if more > 0 else ''}")
        rows.append((state.name, "paused" if state.paused else "active", state.limits,
                     str(state.running), str(state.ready), "; ".join(waiting) or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        + "  " + row[-1] for row in rows)
