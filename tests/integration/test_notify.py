"""PostgreSQL NOTIFY on enqueue: sent by the INSERT itself, delivered at commit, once per queue
per transaction, never for rolled-back work."""

import psycopg
import pytest
from django.db import transaction

from django_sqlqueue.enqueue.notify import CHANNEL
from django_sqlqueue.models import Job
from tests.conftest import direct_connect_kwargs
from tests.testapp.tasks import add, send_email

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def listener():
    conn = psycopg.connect(**direct_connect_kwargs(), autocommit=True)
    conn.execute(f'LISTEN "{CHANNEL}"')
    yield lambda: [n.payload for n in conn.notifies(timeout=0.5)]
    conn.close()


def test_one_notify_per_queue_per_transaction_after_commit(listener):
    with transaction.atomic():
        for n in range(10):
            add.enqueue(n, n)
        send_email.enqueue("a@example.com")
        Job.objects.bulk_enqueue([add.prepare(1, 1), add.prepare(2, 2), send_email.prepare("b")])
        Job.objects.bulk_enqueue([add.prepare(n, n) for n in range(5)], batch_size=2)
        assert listener() == []  # nothing before commit
    assert sorted(listener()) == ["default", "emails"]


def test_enqueue_many_notifies_its_queue_at_commit(listener):
    with transaction.atomic():
        send_email.enqueue_many([("a@example.com",), ("b@example.com",)])
        add.using(queue="other").enqueue_many((n, n) for n in range(5))
        assert listener() == []
    assert sorted(listener()) == ["emails", "other"]


def test_a_rolled_back_savepoint_takes_its_notify_with_it(listener):
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            send_email.enqueue("a@example.com")
            raise RuntimeError("roll back the savepoint")
        add.enqueue(1, 2)
    assert listener() == ["default"]


def test_a_taken_unique_key_sends_no_notify(listener):
    Job.objects.enqueue(add, (1, 2), unique_key="k")
    assert listener() == ["default"]
    with transaction.atomic():
        holder = Job.objects.enqueue(add, (3, 4), unique_key="k")
    assert listener() == []
    assert Job.objects.count() == 1 and holder.args == [1, 2]


def test_a_rolled_back_transaction_notifies_nobody(listener):
    with pytest.raises(RuntimeError), transaction.atomic():
        add.enqueue(1, 2)
        raise RuntimeError("roll back")
    assert listener() == []


def test_autocommit_enqueues_notify_each(listener):
    add.enqueue(1, 2)
    send_email.enqueue("b@example.com")
    assert listener() == ["default", "emails"]


def test_notify_can_be_turned_off(listener, settings):
    settings.SQLQUEUE = {"NOTIFY": False}
    add.enqueue(1, 2)
    Job.objects.bulk_enqueue([add.prepare(1, 1), send_email.prepare("b")])
    assert listener() == []
    settings.SQLQUEUE = {"NOTIFY": True}  # the next enqueue sees the change
    add.enqueue(1, 2)
    assert listener() == ["default"]


@pytest.fixture
def fresh_limiter(monkeypatch):
    """A new per-process notification limiter: earlier tests' enqueues spent no tokens."""
    from django_sqlqueue.enqueue import notify

    monkeypatch.setattr(notify, "_limiter", notify.NotifyLimiter())


def test_a_process_enqueueing_fast_notifies_a_burst_then_a_few_times_a_second(
    listener, settings, monkeypatch
):
    from django_sqlqueue.enqueue import notify

    # The limiter's clock, moved by the test: 20 transactions 0.1 s apart whatever the speed
    # of the machine (on a loaded one, real time let 8 through instead of 5 or 6).
    now = [1000.0]
    monkeypatch.setattr(notify, "_limiter", notify.NotifyLimiter(clock=lambda: now[0]))
    settings.SQLQUEUE = {"NOTIFY_PER_SECOND": 2}
    for n in range(20):
        add.enqueue(n, n)
        now[0] += 0.1  # 1.9 s from the first to the last: 3.8 tokens refilled
    send_email.enqueue("a@example.com")  # another queue has its own budget
    heard = listener()
    assert heard.count("default") == 5 + 3  # the burst, then one every 0.5 s
    assert heard.count("emails") == 1


def test_without_a_limit_every_transaction_notifies(listener, settings, fresh_limiter):
    settings.SQLQUEUE = {"NOTIFY_PER_SECOND": None}
    for n in range(20):
        add.enqueue(n, n)
    assert listener() == ["default"] * 20
