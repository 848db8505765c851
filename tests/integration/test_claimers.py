"""Not every idle worker claims on a NOTIFY (worker/wakeup.py, Claimers): about
CLAIMERS_PER_NOTIFY of the workers serving its queue do, and with that many or fewer, all."""

import random

from django_sqlqueue.worker.wakeup import PEERS_REFRESH_SECONDS, Claimers, Wakeup


def test_with_few_workers_every_one_claims():
    claimers = Claimers(6, rand=lambda: 0.999)
    claimers.set_workers([[]] * 6)
    assert claimers.claims(["default"])


def test_with_many_workers_about_claimers_per_notify_of_them_claim():
    draws = random.Random(18)
    claimers = Claimers(6, rand=draws.random)
    claimers.set_workers([[]] * 150 + [["default"]] * 50 + [["emails"]] * 100)
    assert claimers.workers_serving(["default"]) == 200
    claims = sum(claimers.claims(["default"]) for _ in range(20_000))
    assert 0.025 < claims / 20_000 < 0.035  # 6 / 200 = 0.03


def test_none_means_every_worker_claims():
    claimers = Claimers(None, rand=lambda: 0.999)
    claimers.set_workers([[]] * 500)
    assert claimers.claims(["default"])


def test_a_worker_that_drew_no_claim_is_not_woken_and_one_that_did_is():
    wakeup = Wakeup(alias="default", queues=["default"], poll_interval=60, use_notify=False)
    wakeup.claimers = Claimers(1, rand=iter([0.9, 0.1]).__next__)
    wakeup.claimers.set_workers([["default"]] * 2)  # chance 1/2 each
    assert not wakeup.notified("default") and not wakeup.wait(timeout=0)
    assert wakeup.notified("default") and wakeup.wait(timeout=0)
    assert not wakeup.notified("reports")  # not its queue: no draw at all


def test_workers_are_counted_often_at_first_then_every_30_seconds():
    wakeup = Wakeup(alias="default", queues=None, poll_interval=60, use_notify=False)
    wakeup.use_notify = True  # counting only matters, and only happens, with LISTEN
    reads = []
    for tenth in range(1200):  # two minutes in steps of 0.1 s
        def clock(now=100.0 + tenth / 10):
            return now

        if wakeup.peers_due(clock=clock):
            wakeup.set_peers([], clock=clock)
            reads.append(tenth / 10)
    assert reads[:5] == [0.0, 1.0, 2.0, 4.0, 8.0]
    assert reads[-1] - reads[-2] == PEERS_REFRESH_SECONDS
