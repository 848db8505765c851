"""The per-process notification limiter: a token bucket per (alias, queue), on a fake clock."""

from django_sqlqueue.enqueue.notify import NotifyLimiter


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_burst_then_one_per_refilled_token():
    clock = FakeClock()
    limiter = NotifyLimiter(burst=3, clock=clock)
    assert [limiter.take("default", {"q"}, rate=10) for _ in range(4)] == [True] * 3 + [False]
    clock.now += 0.05  # half a token
    assert not limiter.take("default", {"q"}, rate=10)
    clock.now += 0.06  # the half spent on nothing, plus more: one token
    assert limiter.take("default", {"q"}, rate=10)
    assert not limiter.take("default", {"q"}, rate=10)
    clock.now += 60  # a long pause refills the burst, no more
    assert [limiter.take("default", {"q"}, rate=10) for _ in range(4)] == [True] * 3 + [False]


def test_each_queue_and_alias_has_its_own_bucket_and_one_with_a_token_notifies_them_all():
    limiter = NotifyLimiter(burst=1, clock=FakeClock())
    assert limiter.take("default", {"a"}, rate=1)
    assert not limiter.take("default", {"a"}, rate=1)
    assert limiter.take("other", {"a"}, rate=1)
    assert limiter.take("default", {"a", "b"}, rate=1)  # b's token sends the NOTIFY
    assert not limiter.take("default", {"a", "b"}, rate=1)


def test_no_rate_means_every_insert_notifies():
    limiter = NotifyLimiter(burst=1, clock=FakeClock())
    assert all(limiter.take("default", {"q"}, rate=None) for _ in range(100))
