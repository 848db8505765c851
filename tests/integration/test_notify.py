"""PostgreSQL NOTIFY on enqueue: one per transaction, after commit, naming the queues."""

import psycopg
import pytest
from django.db import connection, transaction

from django_sqlqueue.models import Job
from django_sqlqueue.notify import CHANNEL
from tests.testapp.tasks import add, send_email

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def listener():
    params = connection.settings_dict
    conn = psycopg.connect(dbname=params["NAME"], user=params["USER"], host=params["HOST"],
                           port=params["PORT"], autocommit=True)
    conn.execute(f'LISTEN "{CHANNEL}"')
    yield lambda: [n.payload for n in conn.notifies(timeout=0.5)]
    conn.close()


def test_one_notify_per_transaction_after_commit(listener):
    with transaction.atomic():
        for n in range(10):
            add.enqueue(n, n)
        send_email.enqueue("a@example.com")
        Job.objects.bulk_enqueue([add.prepare(1, 1), add.prepare(2, 2)])
        assert listener() == []  # nothing before commit
    assert listener() == ["default,emails"]


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
    assert listener() == []
