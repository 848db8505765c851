"""The scenario of ``manage.py demo``: enqueue one job of every kind, run them all, explain.

1. Orders are placed in transactions that enqueue their receipt in the same transaction; one
   transaction rolls back and leaves neither an order nor a job behind.
2. More jobs: scheduled, slow, unique (enqueued twice), flaky, always failing, async, rescheduling
   itself, high priority.
3. The periodic schedules declared with ``@schedule`` in shop/tasks.py: the worker syncs them
   and enqueues their ticks, one job each (``stock-check`` ticks every 2 seconds).
4. ``manage.py runworker --burst`` runs them in a subprocess, 4 at a time, and exits once the
   queue is drained; its output is shown as it goes.
5. A table of ``Job.objects.stats()``, one sentence per job saying what happened to it, the
   ticks the schedule fired and who enqueued them, and ``manage.py schedules``.
"""

import os
import subprocess
import sys
import threading
from collections import Counter
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.db import connections, transaction
from django.utils import timezone

from django_sqlqueue.models import Job, Schedule
from django_sqlqueue.schedules import declared
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.ticks.timetables import next_ticks

from .models import Order
from .tasks import (
    build_daily_report,
    charge_card,
    export_to_accounting,
    notify_warehouse,
    render_invoice,
    send_receipt,
    sync_inventory,
)

CUSTOMERS = [
    ("alice@example.com", Decimal("42.00")),
    ("bob@example.com", Decimal("17.50")),
    ("carol@example.com", Decimal("99.90")),
]
SCHEDULE_DELAY_SECONDS = 3
# `runworker --burst` exits once no job is ready or due within a poll interval (0.5 s here), and
# the retries and the scheduled job leave gaps longer than that. The slow job holds a thread
# until they are all due, so one burst runs the whole scenario.
SLOW_JOB_SECONDS = SCHEDULE_DELAY_SECONDS + 1
#: The schedule whose ticks the demo shows firing (every 2 s, in shop/tasks.py).
DEMO_SCHEDULE = "stock-check"
MANAGE_PY = Path(settings.BASE_DIR) / "manage.py"
WORKER_OPTIONS = ["--burst", "--concurrency", "4", "--poll-interval", "0.5"]


class PaymentDeclined(Exception):
    """Raised inside an order's transaction to roll it back."""


def short_name(job) -> str:
    return job.task_name.rsplit(".", 1)[-1]


def times_text(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def error_text(entry: dict) -> str:
    return f"{entry['type'].removeprefix('builtins.')}: {entry['message']}"


class Demo:
    def __init__(self, stdout, style):
        self.stdout = stdout
        self.style = style
        self.notes: dict = {}  # job pk -> what the job stands for in the scenario
        self.timed_out = False  # the worker was stopped after the timeout

    # ---- output ----------------------------------------------------------------------------
    def header(self, text):
        self.stdout.write("")
        self.stdout.write(self.style.MIGRATE_HEADING(f"== {text}"))

    def line(self, text, style=None):
        self.stdout.write(f"  {text}", style)

    def remember(self, job, note):
        self.notes[job.pk] = note
        return job

    # ---- 1. orders -------------------------------------------------------------------------
    def reset(self):
        deleted, _ = Job.objects.all().delete()
        schedules, _ = Schedule.objects.all().delete()
        self.line(f"--fresh: deleted {deleted} job(s) and {schedules} schedule row(s) left by "
                  "earlier runs (--keep keeps them)")

    def place_orders(self) -> list:
        self.header("1. Orders: each receipt job is enqueued in the order's own transaction")
        orders = []
        for email, total in CUSTOMERS:
            with transaction.atomic():
                order = Order.objects.create(customer_email=email, total=total)
                job = send_receipt.enqueue(order.pk)
            self.remember(job, f"receipt of order #{order.pk}")
            self.line(
                f"order #{order.pk} ({email}, {total} EUR) and send_receipt job #{job.pk}: "
                "one commit"
            )
            orders.append(order)

        counts_before = (Order.objects.count(), Job.objects.count())
        try:
            with transaction.atomic():
                order = Order.objects.create(customer_email="dave@example.com", total=5)
                send_receipt.enqueue(order.pk)
                raise PaymentDeclined("card declined")
        except PaymentDeclined as exc:
            counts_after = (Order.objects.count(), Job.objects.count())
            self.line(f"order for dave@example.com: {exc}, the transaction rolls back...")
            self.line(
                f"...and takes its receipt job with it (orders: {counts_before[0]} -> "
                f"{counts_after[0]}, jobs: {counts_before[1]} -> {counts_after[1]})"
            )
        return orders

    # ---- 2. other kinds of jobs ------------------------------------------------------------
    def enqueue_more(self, orders):
        self.header("2. More kinds of jobs")
        first, second, third = orders
        today = timezone.localdate().isoformat()

        job = build_daily_report.using(delay=SCHEDULE_DELAY_SECONDS).enqueue(today)
        self.remember(job, "scheduled")
        run_at = timezone.localtime(job.run_at).strftime("%H:%M:%S")
        self.line(
            f"scheduled    build_daily_report #{job.pk} runs at {run_at}, "
            f"{SCHEDULE_DELAY_SECONDS} s from now"
        )

        job = render_invoice.enqueue(third.pk, seconds=SLOW_JOB_SECONDS)
        self.remember(job, "slow")
        self.line(f"slow         render_invoice #{job.pk} takes {SLOW_JOB_SECONDS} s on one of the "
                  "worker's 4 threads")

        key = f"charge-order-{second.pk}"
        job = charge_card.using(unique_key=key).enqueue(second.pk)
        again = charge_card.using(unique_key=key).enqueue(second.pk)  # "Pay" clicked twice
        rows = Job.objects.filter(unique_key=key).count()
        self.remember(job, "enqueued twice with one unique key")
        self.line(
            f"unique key   charge_card for {key!r} enqueued twice (Pay clicked twice): "
            f"#{job.pk}, #{again.pk}, {rows} row"
        )
        self.line(f"retries      charge_card #{job.pk}: the card provider fails twice, then works")

        job = sync_inventory.enqueue("SKU-404")
        self.remember(job, "permanent error")
        self.line(f"failing      sync_inventory #{job.pk} fails every time; max_attempts=3")

        job = notify_warehouse.enqueue(third.pk)
        self.remember(job, "async def")
        self.line(f"async        notify_warehouse #{job.pk} is an async def")

        job = export_to_accounting.enqueue(third.pk)
        self.remember(job, "rate limited once")
        self.line(f"reschedule   export_to_accounting #{job.pk} asks to run again in 1 s, once")

        job = send_receipt.using(priority=50).enqueue(first.pk)
        self.remember(job, "priority 50")
        self.line(
            f"priority 50  send_receipt #{job.pk}: support resends order #{first.pk}'s receipt; "
            "enqueued last, it is among the first jobs claimed"
        )

    # ---- 3. periodic schedules -------------------------------------------------------------
    def show_schedules(self):
        self.header("3. Periodic jobs: @schedule in shop/tasks.py")
        now = timezone.now()
        for spec in declared():
            table = spec.timetable()
            (first,) = next_ticks(table, now, 1)
            zone = table.zone if spec.cron else timezone.get_current_timezone()
            self.line(f"{spec.name:<13}{table.describe()}, {spec.task_label}; next tick "
                      f"{first.astimezone(zone):%Y-%m-%d %H:%M:%S %Z}")
        self.line("the worker syncs them into the schedule table when it starts, then enqueues "
                  "each due tick once, whoever looks first")

    # ---- 4. processing ---------------------------------------------------------------------
    def run_worker(self, timeout: float, verbosity: int = 1) -> int:
        """Run ``manage.py runworker --burst`` in a subprocess, relaying its output; its exit code.

        The worker gets this process's interpreter, manage.py and environment (DATABASE_URL
        included). ``--burst`` makes it exit 0 once no job is ready or due within a poll interval.
        After ``timeout`` seconds it is stopped and ``self.timed_out`` is set.
        """
        command = [sys.executable, str(MANAGE_PY), "runworker", *WORKER_OPTIONS,
                   "--verbosity", str(verbosity)]
        self.header("4. Running the jobs: manage.py runworker " + " ".join(WORKER_OPTIONS))
        self.line("(a subprocess; its output follows, with the console e-mail backend's receipts)")
        connections.close_all()  # nothing of ours stays open while the worker writes
        self.stdout.flush()
        worker = subprocess.Popen(
            command, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace",
        )
        timer = threading.Timer(timeout, self.stop_worker, [worker, timeout])
        timer.start()
        try:
            try:
                self.relay(worker)
            except KeyboardInterrupt:
                # Ctrl-C reached the worker too (same process group): it stops gracefully and
                # puts its unstarted jobs back. Show that; a second Ctrl-C stops both at once.
                self.relay(worker)
                raise
            return worker.wait()
        finally:
            timer.cancel()
            if worker.poll() is None:
                worker.kill()
                worker.wait()

    def relay(self, worker):
        for text in worker.stdout:
            self.stdout.write(f"  | {text}".rstrip())

    def stop_worker(self, worker, timeout):
        """After ``timeout`` s: SIGTERM (a graceful stop), then SIGKILL if that takes over 10 s."""
        self.timed_out = True
        self.line(f"the worker is still running after {timeout:g} s: stopping it (SIGTERM)",
                  self.style.ERROR)
        worker.terminate()
        try:
            worker.wait(10)
        except subprocess.TimeoutExpired:
            worker.kill()

    # ---- 5. summary ------------------------------------------------------------------------
    def summarize(self) -> list:
        """Print the stats table and what happened to each job; return what went unexpectedly."""
        self.header("5. Summary: Job.objects.stats()")
        stats = Job.objects.stats()
        present = {status for queue in stats.values() for status in queue.counts}
        statuses = [status for status in JobStatus.values if status in present]
        queues = list(stats)
        self.line(f"{'status':<12}" + "".join(f"{q:>10}" for q in queues) + f"{'total':>10}")
        for status in statuses:
            counts = [stats[q].counts.get(status, 0) for q in queues]
            self.line(f"{status:<12}" + "".join(f"{n:>10}" for n in counts) + f"{sum(counts):>10}")

        self.header("What happened")
        jobs = Job.objects.in_bulk(list(self.notes))
        problems = []
        for pk, note in self.notes.items():
            job = jobs[pk]
            expected = "exhausted" if note == "permanent error" else "succeeded"
            if job.status != expected:
                problems.append(f"{job} should have {expected}")
            self.line(f"{short_name(job)} #{pk} ({note}) {self.story(job, jobs.values())}")
        self.explain_priority(jobs.values())
        problems += self.explain_schedule()
        self.header("manage.py schedules")
        call_command("schedules", stdout=self.stdout)
        return problems

    def explain_schedule(self) -> list:
        """The ticks the demo's schedule fired while the worker ran: one job each."""
        prefix = f"schedule:{DEMO_SCHEDULE}@"
        jobs = [job for job in Job.objects.filter(unique_key__startswith=prefix).order_by("run_at")
                if job.schedule_name == DEMO_SCHEDULE]
        per_tick = Counter(job.schedule_tick for job in jobs)
        ran = [job for job in jobs if job.status == JobStatus.SUCCEEDED]
        ticks = ", ".join(f"{timezone.localtime(t):%H:%M:%S}" for t in sorted(per_tick))
        by = Counter(job.payload["schedule"]["by"] for job in jobs)
        self.line(f"{DEMO_SCHEDULE} (every 2 s) fired {times_text(len(per_tick))} while the "
                  f"worker ran: ticks {ticks or 'none'}, one job each, enqueued by "
                  f"{', '.join(by) or 'nobody'}; {len(ran)} ran")
        left = len(jobs) - len(ran)
        if left:
            self.line(f"({left} tick(s) came due as the worker was leaving: their jobs wait "
                      "for the next worker)")
        problems = []
        if not ran:
            problems.append(f"the schedule {DEMO_SCHEDULE} fired no job that ran")
        if any(count > 1 for count in per_tick.values()):
            problems.append(f"a tick of {DEMO_SCHEDULE} has more than one job")
        return problems

    def explain_priority(self, jobs):
        """One claim takes as many jobs as the worker has free threads, highest priority first."""
        first_claim = min((job.claimed_at for job in jobs if job.claimed_at), default=None)
        last = max(jobs, key=lambda job: job.pk)
        if last.priority > 0 and last.attempts == 1 and last.claimed_at == first_claim:
            self.line(f"{short_name(last)} #{last.pk} (priority {last.priority}) was enqueued "
                      "last but claimed in the worker's first batch: higher priority runs first")

    def unfinished(self) -> list:
        """The demo's jobs that the worker left unfinished."""
        return list(Job.objects.filter(pk__in=list(self.notes)).unfinished().order_by("pk"))

    def story(self, job, others) -> str:
        errors = job.errors or []
        if job.status == "exhausted":
            last = error_text(errors[-1]) if errors else "no error recorded"
            return f"exhausted its {job.attempts} attempts; last error: {last}"
        if job.status != "succeeded":
            return f"ended {job.status} after {job.attempts} attempt(s)"
        if errors:
            kinds = sorted({error_text(e).split(":")[0] for e in errors})
            return (f"failed {times_text(len(errors))} ({', '.join(kinds)}) and succeeded on "
                    f"attempt {job.attempts}")
        if job.attempts > 1:
            return (f"was rescheduled {times_text(job.attempts - 1)} (not counted as a failure) "
                    f"and succeeded on attempt {job.attempts}")
        if (job.run_at - job.enqueued_at).total_seconds() >= 1:
            waited = (job.claimed_at - job.enqueued_at).total_seconds()
            return f"waited for its run_at and started {waited:.1f} s after it was enqueued"
        ran = (job.finished_at - job.claimed_at).total_seconds()
        if ran >= 1:
            meanwhile = sum(1 for other in others if other.finished_at and other.pk != job.pk
                            and job.claimed_at < other.finished_at < job.finished_at)
            return (f"ran for {ran:.1f} s on one thread; {meanwhile} other jobs finished "
                    "meanwhile on the others")
        return "succeeded on attempt 1"
