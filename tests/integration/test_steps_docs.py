"""docs/steps.md's example runs as written: an order pipeline whose worker dies while it sends
the email re-runs only the email step (the stock reserved once, the card charged once)."""

import re
import sys
import types
from pathlib import Path

import pytest

from django_sqlqueue.run.execution import run_job
from tests.support.claims import claim_now
from tests.testapp.models import Stock

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "steps.md").read_text()
EXAMPLE = next(block for block in re.findall(r"```python\n(.*?)```", PAGE, re.DOTALL)
               if "def reserve_stock" in block)


class Payments:
    """The payment service: charges once per idempotency key, as real ones do."""

    def __init__(self):
        self.charges = {}

    def charge(self, amount_cents, idempotency_key):
        charge = self.charges.setdefault(
            idempotency_key, {"id": f"ch_{len(self.charges) + 1}", "amount": amount_cents})
        return charge


class Mail:
    def __init__(self):
        self.sent, self.fail_next = [], False

    def send_receipt(self, email, order_id, charge_id):
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("the mail server hung up")
        self.sent.append((email, order_id, charge_id))


@pytest.fixture
def shop(monkeypatch):
    """The example's ``shop`` package, its models the test app's, then the example itself."""
    package = types.ModuleType("shop")
    package.payments, package.mail = Payments(), Mail()
    package.models = types.SimpleNamespace(Stock=Stock)
    for name, module in {"shop": package, "shop.payments": package.payments,
                         "shop.mail": package.mail, "shop.models": package.models}.items():
        monkeypatch.setitem(sys.modules, name, module)
    example = types.ModuleType("shop.orders")
    exec(compile(EXAMPLE, "docs/steps.md", "exec"), example.__dict__)  # noqa: S102 - our docs
    return package, example


def test_the_order_pipeline_of_the_docs_resumes_at_the_email(shop):
    package, example = shop
    Stock.objects.create(sku="mug", available=5)
    job = example.process_order.enqueue(7, "mug", 2, 1250, "ada@example.com")
    package.mail.fail_next = True  # the first run dies at the email
    assert run_job(claim_now(job.pk)).outcome == "failed"
    assert run_job(claim_now(job.pk)).outcome == "succeeded"
    job.refresh_from_db()
    assert job.result == {"reserved": 2, "charge": "ch_1"}
    assert Stock.objects.get(sku="mug").available == 3  # reserved once
    assert list(package.payments.charges) == [f"sqlqueue-job-{job.pk}-step-charge"]
    assert package.mail.sent == [("ada@example.com", 7, "ch_1")]


def test_an_order_out_of_stock_is_aborted_and_charges_nothing(shop):
    package, example = shop
    Stock.objects.create(sku="mug", available=1)
    job = example.process_order.enqueue(8, "mug", 2, 1250, "ada@example.com")
    assert run_job(claim_now(job.pk)).outcome == "exhausted"
    assert package.payments.charges == {} and Stock.objects.get(sku="mug").available == 1
