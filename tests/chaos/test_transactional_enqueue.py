"""Scenario 4, transactional enqueue under load: threads enqueue jobs inside transactions that also
create an Order, and half of those transactions roll back, while a fleet of workers claims. Exactly
the committed jobs run, once each, and each of them sees its Order."""

import random
import threading
import time

import pytest
from django.db import connection, transaction

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.chaos.conftest import elapsed, sized
from tests.chaos.ledger import tally
from tests.support.fleet import Fleet, seed
from tests.testapp.jobs import order
from tests.testapp.models import Order, Run

pytestmark = [pytest.mark.server_database, pytest.mark.django_db(transaction=True)]

ENQUEUES = sized(1_000, 20_000)
THREADS = 4
SETTINGS = {"LEASE_SECONDS": 5, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.3}


class RolledBack(Exception):
    pass


def _enqueue_in_transactions(decisions, rng_seed, committed, rolled_back, errors):
    rng = random.Random(rng_seed)
    try:
        for commit in decisions:
            try:
                with transaction.atomic():
                    new = Order.objects.create(total=len(committed))
                    job = order.enqueue(new.pk)
                    time.sleep(rng.uniform(0, 0.004))  # workers claim while this is open
                    if not commit:
                        raise RolledBack
            except RolledBack:
                rolled_back.append((job.pk, new.pk))
            else:
                committed.append((job.pk, new.pk))
    except Exception as exc:  # reported by the test, not lost in a thread
        errors.append(exc)
    finally:
        connection.close()


def test_exactly_the_committed_enqueues_run_once_each(start_worker, reliability):
    rng = random.Random(run_seed := seed())
    decisions = [True] * (ENQUEUES // 2) + [False] * (ENQUEUES - ENQUEUES // 2)
    rng.shuffle(decisions)
    started = time.monotonic()
    fleet = Fleet(start_worker, (1, 2, 4), settings=SETTINGS)
    committed, rolled_back, errors = [], [], []
    threads = [
        threading.Thread(
            target=_enqueue_in_transactions,
            args=(decisions[n::THREADS], rng.random(), committed, rolled_back, errors),
        )
        for n in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    job_ids = {job_id for job_id, _ in committed}
    fleet.wait_until(lambda: Job.objects.filter(status=JobStatus.SUCCEEDED).count() >= len(job_ids),
                     what="the committed jobs", timeout=sized(120, 1200))
    time.sleep(1)  # a few more polls: anything else that could run, would run now
    seconds = elapsed(started)
    assert fleet.running(), f"a worker exited: {fleet.dead()}"
    codes = fleet.stop()

    result = tally()
    runs = list(Run.objects.values_list("job_id", "key"))
    reliability(
        "transactional enqueue", seed=run_seed, enqueues=ENQUEUES, committed=len(committed),
        rolled_back=len(rolled_back), worker_exits=0, **result.figures(), seconds=seconds,
    )
    assert len(committed) == len(rolled_back) == ENQUEUES // 2
    assert set(Job.objects.values_list("pk", flat=True)) == job_ids  # no rolled-back row exists
    assert set(Order.objects.values_list("pk", flat=True)) == {pk for _, pk in committed}
    assert sorted(job_id for job_id, _ in runs) == sorted(job_ids)  # each ran exactly once
    assert {int(key) for _, key in runs} == {order_id for _, order_id in committed}
    assert result.duplicates == 0
    result.assert_clean()  # every committed job succeeded: it found its Order
    assert codes == [0] * len(codes), fleet.output()[-5000:]
