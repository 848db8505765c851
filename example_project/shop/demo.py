"""The scenario of ``manage.py demo``: enqueue one job of every kind, run them all, explain.

1. Orders are placed in transactions that enqueue their receipt in the same transaction; one
   transaction rolls back and leaves neither an order nor a job behind.
2. More jobs: scheduled, high priority, unique (enqueued twice), flaky, always failing, async,
   rescheduling itself.
3. The jobs run in this process with a minimal loop (see ``process``).
4. A table of ``Job.objects.stats()`` and one sentence per job saying what happened to it.
"""

import json
import time
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from django_sqlqueue.execution import run_job
from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus

from .models import Order
from .tasks import (
    build_daily_report,
    charge_card,
    export_to_accounting,
    notify_warehouse,
    send_receipt,
    sync_inventory,
)

CUSTOMERS = [
    ("alice@example.com", Decimal("42.00")),
    ("bob@example.com", Decimal("17.50")),
    ("carol@example.com", Decimal("99.90")),
]
SCHEDULE_DELAY_SECONDS = 3
POLL_SECONDS = 0.2


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
        self.started = time.monotonic()
        self.notes: dict = {}  # job pk -> what the job stands for in the scenario
        self.claim_order: list = []  # job pks in the order they were claimed

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
        self.line(f"--fresh: deleted {deleted} job(s) left by earlier runs (--keep keeps them)")

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

        job = send_receipt.using(priority=50).enqueue(first.pk)
        self.remember(job, "priority 50")
        self.line(
            f"priority 50  send_receipt #{job.pk}: support resends order #{first.pk}'s receipt; "
            "it runs first"
        )

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

    # ---- 3. processing ---------------------------------------------------------------------
    def process(self, worker_id: str, timeout: float) -> bool:
        """Claim and run jobs until none is unfinished; False if that takes over ``timeout`` s.

        A minimal worker loop, for the demo only: the runworker command (coming in a later
        release) adds concurrency, signal handling, lease rescue and polling back-off.
        """
        self.header(f"3. Running the jobs in this process (worker {worker_id})")
        self.line("(the console e-mail backend prints each receipt as it is sent)")
        deadline = time.monotonic() + timeout
        waiting = False
        while True:
            Job.objects.expire()
            jobs = Job.objects.claim(None, worker_id, limit=10)
            for job in jobs:
                self.claim_order.append(job.pk)
                self.report(run_job(job))
            if jobs:
                waiting = False
                continue
            pending = Job.objects.unfinished().count()
            if not pending:
                return True
            if time.monotonic() > deadline:
                self.line(f"timed out after {timeout:g} s with {pending} unfinished job(s):",
                          self.style.ERROR)
                for job in Job.objects.unfinished().order_by("pk"):
                    self.line(f"  {job} run_at={job.run_at:%H:%M:%S} claimed_by={job.claimed_by}")
                return False
            if not waiting:
                self.line(f"{self.elapsed()}  nothing due now; waiting for {pending} job(s)")
                waiting = True
            time.sleep(POLL_SECONDS)

    def elapsed(self) -> str:
        return f"{f'+{time.monotonic() - self.started:.2f}s':>7}"

    def report(self, run):
        job, outcome = run.job, run.outcome
        text = f"{self.elapsed()}  {short_name(job):<20} #{job.pk:<3} attempt {job.attempts}  "
        if outcome == "succeeded":
            result = json.dumps(job.result)
            style = self.style.SUCCESS
            text += f"succeeded -> {result if len(result) < 60 else result[:57] + '...'}"
        elif outcome == "failed":
            delay = (job.run_at - timezone.now()).total_seconds()
            style = self.style.WARNING
            text += f"failed ({error_text(job.errors[-1])}); retry in {max(delay, 0):.1f} s"
        elif outcome == "exhausted":
            style = self.style.ERROR
            text += f"exhausted ({error_text(job.errors[-1])})"
        elif outcome == "rescheduled":
            delay = (job.run_at - timezone.now()).total_seconds()
            style = None
            text += f"rescheduled, runs again in {max(delay, 0):.1f} s (not a failure)"
        else:
            style = self.style.ERROR
            text += outcome
        self.line(text, style)

    # ---- 4. summary ------------------------------------------------------------------------
    def summarize(self) -> list:
        """Print the stats table and what happened to each job; return what went unexpectedly."""
        self.header("4. Summary: Job.objects.stats()")
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
            self.line(f"{short_name(job)} #{pk} ({note}) {self.story(job)}")
        if self.claim_order:
            first = jobs.get(self.claim_order[0])
            if first is not None:
                self.line(f"the first job claimed was {short_name(first)} #{first.pk} "
                          f"(priority {first.priority}): higher priority runs first")
        return problems

    def story(self, job) -> str:
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
        waited = (job.claimed_at - job.enqueued_at).total_seconds()
        if waited >= 1:
            return f"waited for its run_at and started {waited:.1f} s after it was enqueued"
        return "succeeded on attempt 1"
