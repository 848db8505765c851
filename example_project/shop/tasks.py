"""The shop's background jobs.

An installed app's ``tasks.py`` is imported at start-up by django_sqlqueue, so every ``@job`` here
is registered in web processes and workers alike. Arguments are plain JSON (ids, ISO dates): a job
fetches what it needs from the database when it runs.
"""

import asyncio
import datetime as dt
import time
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.core.mail import send_mail
from django.db.models import Count, Sum

from django_sqlqueue import Reschedule, current_job, job, report_progress, schedule

from .models import Order, Report


@job(queue="emails", max_attempts=5)
def send_receipt(order_id):
    """E-mail the receipt of an order (printed on the console by the example's e-mail backend)."""
    order = Order.objects.get(pk=order_id)
    send_mail(
        subject=f"Your receipt for order #{order.pk}",
        message=f"Thank you for your order. Total: {order.total} EUR.",
        from_email=None,  # DEFAULT_FROM_EMAIL
        recipient_list=[order.customer_email],
    )
    return {"to": order.customer_email}


@schedule(cron="5 0 * * *", timezone="Europe/Paris", name="daily-report")
@job
def build_daily_report(day_iso=None):
    """Write the sales report of one day (an ISO date, since job arguments are JSON).

    Also scheduled, at 00:05 Paris time every night: then it has no date, and reports the day
    before its tick (``current_job().schedule_tick``), however late the job runs.
    """
    if day_iso is None:
        tick = current_job().schedule_tick.astimezone(ZoneInfo("Europe/Paris"))
        day_iso = (tick.date() - dt.timedelta(days=1)).isoformat()
    day = dt.date.fromisoformat(day_iso)
    totals = Order.objects.filter(created_at__date=day).aggregate(
        orders=Count("pk"), revenue=Sum("total")
    )
    # Round: SQLite sums decimals as floats.
    revenue = (totals["revenue"] or Decimal(0)).quantize(Decimal("0.01"))
    report = Report.objects.create(
        title=f"Sales on {day_iso}",
        content=f"{totals['orders']} orders, {revenue} EUR in total.",
    )
    # A job's result is stored as JSON: a Decimal would be refused, so send the amount as text.
    return {"report_id": report.pk, "orders": totals["orders"], "revenue": str(revenue)}


@schedule(every=2, name="stock-check")
@job
def check_stock():
    """A periodic check, every 2 seconds (a demo's pace: a real shop would say every=300).

    Whichever worker looks first enqueues each tick, exactly once; the job knows its tick.
    """
    tick = current_job().schedule_tick
    return {"tick": tick and tick.isoformat(), "orders": Order.objects.count()}


@job
def render_invoice(order_id, seconds=4.0):
    """Render an order's invoice as a PDF: slow (``seconds`` stands for the rendering).

    It holds one of the worker's threads meanwhile; the other threads go on with the queue.
    """
    order = Order.objects.get(pk=order_id)
    time.sleep(seconds)
    return {"order_id": order.pk, "invoice": f"invoice-{order.pk}.pdf"}


@job
def charge_card(order_id):
    """Charge an order's card. The payment provider is flaky: the first two attempts fail.

    ``current_job().attempts`` counts the starts of this job, 1 for the first one; a real job could
    use ``current_job().pk`` as the idempotency key of the charge.
    """
    order = Order.objects.get(pk=order_id)
    attempt = current_job().attempts
    if attempt <= 2:
        raise ConnectionError("payment provider unreachable")
    return {"order_id": order.pk, "charged": str(order.total), "attempt": attempt}


@job(max_attempts=3)
def sync_inventory(sku):
    """Push a product's stock level to the warehouse, which does not know this product.

    The error is permanent, so every attempt fails and the job ends exhausted. (A real job that
    knows an error cannot mend would ``raise Abort(...)`` to give up without retrying.)
    """
    raise LookupError(f"the warehouse does not know SKU {sku!r}")


@job
async def notify_warehouse(order_id):
    """Tell the warehouse to ship an order: async jobs are run with ``asyncio.run``."""
    await asyncio.sleep(0.01)  # stands for an HTTP call made with an async client
    return {"order_id": order_id, "notified": True}


@job
def export_to_accounting(order_id):
    """Send an order to the accounting system, whose API is rate limited.

    Raising ``Reschedule`` runs the job again later without counting a failure: here once, on the
    first attempt, as if the API had answered "429 Too Many Requests, retry after 1 s".
    """
    if current_job().attempts == 1:
        raise Reschedule(delay=1)
    return {"order_id": order_id, "exported": True}


@job
def export_catalogue(items=40, seconds_per_item=0.05):
    """Export the catalogue, item by item, reporting its progress as it goes: the page at
    /exports/ (shop/views.py) follows it with a progress bar.

    ``report_progress`` costs no query: the worker writes the latest value a few times a second.
    """
    for done in range(1, items + 1):
        time.sleep(seconds_per_item)  # stands for exporting one item
        report_progress(done, items, f"exported item {done} of {items}")
    return {"items": items, "file": "catalogue.csv"}
