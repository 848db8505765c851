"""A believable queue at a bad moment, for the browser test and the screenshots in docs/: four
queues with an hour of throughput, a burst of payment failures, a silent reports worker, and a
mix of every status among the newest jobs."""

import datetime as dt
import random

from django.utils import timezone

from django_sqlqueue.models import Job, JobStep, Worker

TASKS = {
    "emails": ["shop.tasks.send_receipt", "shop.tasks.send_newsletter"],
    "billing": ["shop.tasks.charge_card", "shop.tasks.refund_order"],
    "default": ["shop.tasks.sync_inventory", "shop.tasks.resize_image"],
    "reports": ["shop.tasks.build_sales_report"],
}
PER_MINUTE = {"emails": 9, "default": 5, "billing": 3, "reports": 0.4}

TIMEOUT_TRACEBACK = """Traceback (most recent call last):
  File "/srv/shop/django_sqlqueue/run/runner.py", line 71, in _call
    result = task.func(*args, **kwargs)
  File "/srv/shop/shop/tasks.py", line 48, in charge_card
    payment = gateway.charge(order.total, token=order.card_token)
  File "/srv/shop/shop/payments.py", line 112, in charge
    response = self.session.post(self.url("charges"), json=body, timeout=10)
  File "/srv/venv/lib/python3.12/site-packages/requests/sessions.py", line 637, in post
    return self.request("POST", url, data=data, json=json, **kwargs)
  File "/srv/venv/lib/python3.12/site-packages/requests/adapters.py", line 713, in send
    raise ReadTimeout(e, request=request)
requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='api.payments.example', port=443): \
Read timed out. (read timeout=10)
"""
GATEWAY_TRACEBACK = """Traceback (most recent call last):
  File "/srv/shop/django_sqlqueue/run/runner.py", line 71, in _call
    result = task.func(*args, **kwargs)
  File "/srv/shop/shop/tasks.py", line 52, in charge_card
    payment.raise_for_status()
  File "/srv/shop/shop/payments.py", line 61, in raise_for_status
    raise GatewayError(f"{self.status} {self.reason}: {self.body[:200]}")
shop.payments.GatewayError: 503 Service Unavailable: upstream acquirer is not responding
"""
SMTP_TRACEBACK = """Traceback (most recent call last):
  File "/srv/shop/django_sqlqueue/run/runner.py", line 71, in _call
    result = task.func(*args, **kwargs)
  File "/srv/shop/shop/tasks.py", line 21, in send_receipt
    message.send()
  File "/srv/venv/lib/python3.12/smtplib.py", line 405, in getreply
    raise SMTPServerDisconnected("Connection unexpectedly closed")
smtplib.SMTPServerDisconnected: Connection unexpectedly closed
"""


def _error(attempt, at, kind, message, traceback, worker):
    return {"attempt": attempt, "at": at.isoformat(), "type": kind, "message": message,
            "traceback": traceback, "worker": worker}


def seed(now=None) -> dict:
    now = now or timezone.now()
    rng = random.Random(5)
    web1 = Worker.objects.create(
        name="web-1:31337:a1f3c9", host="web-1", pid=31337, queues=["default", "emails"],
        concurrency=4,
        started_at=now - dt.timedelta(hours=6, minutes=12), jobs_done=18_402,
        last_heartbeat_at=now - dt.timedelta(seconds=4),
    )
    web2 = Worker.objects.create(
        name="web-2:8812:b7e210", host="web-2", pid=8812, queues=["emails", "billing"],
        concurrency=8, started_at=now - dt.timedelta(hours=2, minutes=3), jobs_done=6_120,
        last_heartbeat_at=now - dt.timedelta(seconds=7),
    )
    Worker.objects.create(
        name="batch-1:2201:c4d5e6", host="batch-1", pid=2201, queues=["reports"],
        concurrency=1, started_at=now - dt.timedelta(days=2, hours=1), jobs_done=311,
        last_heartbeat_at=now - dt.timedelta(minutes=4, seconds=12),
    )
    workers = [web1.name, web2.name]

    # An hour of finished jobs, with a burst of payment failures twenty minutes ago.
    history = []
    for minute in range(60, 0, -1):
        for queue, rate in PER_MINUTE.items():
            wave = 1 + 0.5 * ((minute % 17) / 17)
            for _ in range(rng.randint(0, round(rate * wave * 1.6))):
                finished = now - dt.timedelta(minutes=minute, seconds=rng.uniform(0, 59))
                took = rng.uniform(0.05, 2.5 if queue != "reports" else 40)
                failed = queue == "billing" and 15 <= minute <= 22 and rng.random() < 0.6
                failed = failed or rng.random() < 0.01
                history.append(Job(
                    task_name=rng.choice(TASKS[queue]), queue=queue,
                    payload={"args": [rng.randint(10_000, 11_000)], "kwargs": {}},
                    status="exhausted" if failed else "succeeded",
                    attempts=3 if failed else 1, max_attempts=3,
                    enqueued_at=finished - dt.timedelta(seconds=took + rng.uniform(0, 3)),
                    run_at=finished - dt.timedelta(seconds=took + 1),
                    claimed_at=finished - dt.timedelta(seconds=took), finished_at=finished,
                    claimed_by=rng.choice(workers), result=None if failed else {"ok": True},
                    errors=[_error(a, finished, "requests.exceptions.ReadTimeout",
                                   "HTTPSConnectionPool(host='api.payments.example', port=443): "
                                   "Read timed out. (read timeout=10)", TIMEOUT_TRACEBACK,
                                   web2.name) for a in (1, 2, 3)] if failed else [],
                ))
    Job.objects.bulk_create(sorted(history, key=lambda job: job.enqueued_at))
    return _recent(now, web1, web2)


def _recent(now, web1, web2) -> dict:
    """The newest jobs, one screen of them: every status, and what went wrong."""
    def job(minutes_ago, **fields):
        enqueued = now - dt.timedelta(minutes=minutes_ago)
        fields.setdefault("run_at", enqueued)
        fields.setdefault("payload", {"args": [10_452], "kwargs": {}})
        return Job.objects.create(enqueued_at=enqueued, max_attempts=3, **fields)

    def started(minutes_ago, seconds=1.2):
        claimed = now - dt.timedelta(minutes=minutes_ago)
        return {"claimed_at": claimed, "finished_at": claimed + dt.timedelta(seconds=seconds)}

    at = now - dt.timedelta(minutes=26)
    charge_errors = [
        _error(1, at, "requests.exceptions.ReadTimeout", "HTTPSConnectionPool(host="
               "'api.payments.example', port=443): Read timed out. (read timeout=10)",
               TIMEOUT_TRACEBACK, web2.name),
        _error(2, at + dt.timedelta(seconds=10), "requests.exceptions.ReadTimeout",
               "HTTPSConnectionPool(host='api.payments.example', port=443): Read timed out. "
               "(read timeout=10)", TIMEOUT_TRACEBACK, web1.name),
        _error(3, at + dt.timedelta(seconds=30), "shop.payments.GatewayError",
               "503 Service Unavailable: upstream acquirer is not responding",
               GATEWAY_TRACEBACK, web2.name),
    ]
    notable = {}
    job(34, task_name="shop.tasks.build_sales_report", queue="reports",
        payload={"args": [], "kwargs": {"day": "2026-01-14"}})
    job(31, task_name="shop.tasks.send_newsletter", queue="emails", status="cancelled",
        finished_at=now - dt.timedelta(minutes=30))
    notable["exhausted"] = job(
        27, task_name="shop.tasks.charge_card", queue="billing", status="exhausted",
        attempts=3, claimed_by=web2.name, errors=charge_errors, unique_key="charge:order-10452",
        payload={"args": [10_452], "kwargs": {"amount": "49.90", "currency": "EUR"}},
        **started(25.5, 0.4),
    )
    job(22, task_name="shop.tasks.build_sales_report", queue="reports",
        payload={"args": [], "kwargs": {"day": "2026-01-15"}})
    job(19, task_name="shop.tasks.sync_inventory", queue="default", status="expired",
        expires_at=now - dt.timedelta(minutes=9), finished_at=now - dt.timedelta(minutes=9))
    job(14, task_name="shop.tasks.resize_image", queue="default", status="succeeded",
        attempts=1, claimed_by=web1.name, result={"width": 1200, "height": 800},
        **started(14, 0.8))
    notable["failed"] = job(
        11, task_name="shop.tasks.send_receipt", queue="emails", status="failed", attempts=1,
        claimed_by=web2.name, run_at=now + dt.timedelta(minutes=4),
        payload={"args": [10_460], "kwargs": {}}, claimed_at=now - dt.timedelta(minutes=11),
        errors=[_error(1, now - dt.timedelta(minutes=11), "smtplib.SMTPServerDisconnected",
                       "Connection unexpectedly closed", SMTP_TRACEBACK, web2.name)],
    )
    # Its durable steps (docs/steps.md): two completed before the SMTP server hung up.
    rendered = now - dt.timedelta(minutes=11, seconds=2)
    for name, result, took in (
            ("render", {"subject": "Your receipt for order 10460", "bytes": 18_422}, 0.21),
            ("attach_invoice", "invoices/2026/10460.pdf", 1.34)):
        JobStep.objects.create(job=notable["failed"], name=name, result=result, attempt=1,
                               started_at=rendered, duration_seconds=took,
                               finished_at=rendered + dt.timedelta(seconds=took))
        rendered += dt.timedelta(seconds=took)
    job(9, task_name="shop.tasks.charge_card", queue="billing", status="failed", attempts=2,
        claimed_by=web1.name, run_at=now + dt.timedelta(seconds=50),
        claimed_at=now - dt.timedelta(minutes=1), errors=charge_errors[:2])
    job(6, task_name="shop.tasks.refund_order", queue="billing", status="succeeded",
        attempts=1, claimed_by=web2.name, result={"refund": "re_3PQ"}, **started(6, 2.1))
    job(4, task_name="shop.tasks.sync_inventory", queue="default", status="running",
        attempts=1, claimed_by=web1.name, claimed_at=now - dt.timedelta(seconds=38),
        lease_expires_at=now + dt.timedelta(seconds=20))
    job(3, task_name="shop.tasks.send_receipt", queue="emails", status="running", attempts=1,
        claimed_by=web2.name, claimed_at=now - dt.timedelta(seconds=2),
        lease_expires_at=now + dt.timedelta(seconds=28))
    job(2, task_name="shop.tasks.build_sales_report", queue="reports",
        payload={"args": [], "kwargs": {"day": "2026-01-16"}})
    job(1, task_name="shop.tasks.send_newsletter", queue="emails",
        run_at=now + dt.timedelta(hours=1), unique_key="newsletter:2026-01")
    job(0.5, task_name="shop.tasks.resize_image", queue="default",
        payload={"args": [], "kwargs": {"image_id": 88_213, "sizes": [320, 1200]}})
    return notable


def seed_schedules(now=None) -> list:
    """Four schedules, as workers would have synced them: a nightly report in Berlin time that
    ran, a frequent check whose last job failed, a paused newsletter and a retired one. Each
    last run is a job of its own, linked from the schedule."""
    from django_sqlqueue.models import Schedule
    from django_sqlqueue.ticks.timetables import CronTimetable, IntervalTimetable, ticks_from

    now = now or timezone.now()
    options = {"queue": "default", "priority": 0, "max_attempts": 3,
               "retry_backoff_seconds": 5.0, "retry_min_delay_seconds": 1.0,
               "retry_max_delay_seconds": 3600.0, "retry_jitter": 0.1,
               "timeout_seconds": None, "max_age_seconds": None}

    def create(name, task, *, cron="", every=None, timezone_name="UTC", status="succeeded",
               kwargs=None, queue="default", **fields):
        table = CronTimetable(cron, timezone_name) if cron else IntervalTimetable(every)
        last_tick = None
        for tick in ticks_from(table, now - dt.timedelta(days=8)):
            if tick > now:
                break
            last_tick = tick
        job = Job.objects.create(
            task_name=task, queue=queue, payload={"args": [], "kwargs": kwargs or {}, "schedule": {
                "name": name, "tick": last_tick.isoformat(), "by": "web-1:31337:a1f3c9"}},
            status=status, attempts=1, run_at=last_tick, enqueued_at=last_tick,
            claimed_at=last_tick, finished_at=last_tick + dt.timedelta(seconds=2),
            unique_key=None, claimed_by="web-1:31337:a1f3c9",
        )
        return Schedule.objects.create(
            name=name, task_name=task, cron=cron, every_seconds=every, timezone=timezone_name,
            payload={"args": [], "kwargs": kwargs or {}},
            job_options={**options, "queue": queue}, next_run_at=next(table.ticks_after(now)),
            last_run_at=last_tick, last_job_id=job.pk, last_enqueued_by="web-1:31337:a1f3c9",
            runs=fields.pop("runs", 40), created_at=now - dt.timedelta(days=30),
            synced_at=now - dt.timedelta(days=2), **fields,
        )

    return [
        create("sales-report-nightly", "shop.tasks.build_sales_report", cron="30 2 * * *",
               timezone_name="Europe/Berlin", queue="reports", runs=30),
        create("inventory-sync", "shop.tasks.sync_inventory", every=300, status="exhausted",
               kwargs={"full": False}, runs=8_640, missed="catch_up", catch_up=12,
               skipped_ticks=3, last_skipped_at=now - dt.timedelta(days=1)),
        create("newsletter-monday", "shop.tasks.send_newsletter", cron="0 9 * * mon",
               timezone_name="America/New_York", queue="emails", runs=4,
               paused_at=now - dt.timedelta(hours=3), paused_by="admin:ops"),
        create("legacy-export", "shop.tasks.export_legacy", cron="@daily", runs=120,
               retired_at=now - dt.timedelta(days=1)),
    ]


def seed_workflow(now=None):
    """A month-end billing workflow caught mid-way, for the workflow page's screenshot: the
    ledger exported; 120 charges after it (most done, some running, queued or retrying, one
    failed for good, which cancelled its receipt); the billing report, which runs anyway,
    waiting for the rest; the finance e-mail waiting for the report. Returns its id."""
    import uuid

    from django_sqlqueue.models import JobDependency

    now = now or timezone.now()
    workflow = uuid.UUID("5f0c2a4e-9b1d-4c3e-8a7f-2d6b1e0c9a31")
    rng = random.Random(7)

    def job(task, status, minutes_ago, parents=0, **fields):
        at = now - dt.timedelta(minutes=minutes_ago)
        done = status in ("succeeded", "exhausted")
        return Job(task_name=task, queue="billing", status=status, workflow_id=workflow,
                   payload={"args": [], "kwargs": fields.pop("kwargs", {})}, max_attempts=3,
                   attempts=fields.pop("attempts", 0 if status in ("waiting", "queued") else 1),
                   enqueued_at=now - dt.timedelta(minutes=40), run_at=at,
                   claimed_at=at if status not in ("waiting", "queued") else None,
                   finished_at=at + dt.timedelta(seconds=1) if done else None,
                   parents_pending=parents, **fields)

    export = job("shop.tasks.export_ledger", "succeeded", 38)
    export.save()
    statuses = ["succeeded"] * 96 + ["running"] * 12 + ["queued"] * 9 + ["failed"] * 2
    statuses.insert(41, "exhausted")
    charges = [job("shop.tasks.charge_card", status, rng.uniform(2, 30),
                   attempts=3 if status == "exhausted" else 2 if status == "failed" else 1,
                   kwargs={"order": 20_400 + n})
               for n, status in enumerate(statuses)]
    charges = Job.objects.bulk_create(charges)
    failed = next(charge for charge in charges if charge.status == "exhausted")
    receipt = job("shop.tasks.send_receipt", "cancelled", 20, attempts=0,
                  cancelled_by=f"workflow: parent job {failed.pk} ended exhausted",
                  kwargs={"order": 20_441})
    unfinished = sum(status not in ("succeeded", "exhausted") for status in statuses)
    report = job("shop.tasks.build_billing_report", "waiting", 0, parents=unfinished)
    mail = job("shop.tasks.email_finance", "waiting", 0, parents=1)
    receipt.finished_at = now - dt.timedelta(minutes=20)
    for row in (receipt, report, mail):
        row.save()
    edges = [JobDependency(child=charge, parent=export, resolved_at=export.finished_at)
             for charge in charges]
    edges.append(JobDependency(child=receipt, parent=failed, resolved_at=failed.finished_at))
    edges += [JobDependency(child=report, parent=charge, position=n, run_anyway=True,
                            resolved_at=charge.finished_at)
              for n, charge in enumerate(charges)]
    edges.append(JobDependency(child=mail, parent=report))
    JobDependency.objects.bulk_create(edges)
    return workflow
