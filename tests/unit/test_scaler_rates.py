"""worker/scaler.Scaler's estimate of arrivals and completions, between looks a window apart:
completions from the attempts the live workers report, arrivals as completions plus the growth
of the due and running jobs."""

import datetime as dt

import pytest

from django_sqlqueue.observability.autoscale import QueueLoad, ScaleSettings
from django_sqlqueue.observability.fleet import Fleet
from django_sqlqueue.worker.scaler import Scaler


def reading(due, running, done):
    return Fleet(dt.datetime.now(dt.UTC), (QueueLoad("default", due=due, running=running,
                                                     oldest_due_age=3.0 if due else None),),
                 processes=1, slots=4, done=done)


def test_rates_come_from_the_look_a_window_ago():
    clock, readings = [0.0], []
    scaler = Scaler(settings=ScaleSettings(minimum=1, maximum=4, target_wait=4.0, cooldown=9.0),
                    concurrency=4, queues=None, alias="default", interval=1.0,
                    measure=lambda alias, queues: readings[-1], clock=lambda: clock[0],
                    after_look=lambda: None)
    assert scaler.window == 4.0
    # Every second, the backlog grows by 5 while worker a completes 2 and worker b 1; worker c
    # appears late, and worker b's count is gone once it exits (neither counts as completions).
    for second in range(9):
        clock[0] = float(second)
        done = {"a": 2 * second, "b": second} if second < 7 else {"a": 2 * second}
        if second >= 6:
            done["c"] = 100
        readings.append(reading(5 * second, 4, done))
        scaler.look(1)
        if second < 2:
            assert scaler.rates == (None, None)  # less than half a window of looks
    # Against the newest look at least a window (4 s) old: a grew by 8, b is gone, c is new: 2
    # completions per second; the backlog grew by 20: 5 more per second arrive than complete.
    assert scaler.samples[0].at == 4.0
    arrivals, completions = scaler.rates
    assert completions == pytest.approx(2.0) and arrivals == pytest.approx(7.0)
    # At 7 jobs/s arriving against 2 completing, with due jobs past half the target: grow.
    assert scaler.last.action == "grow"
    assert "7.0 jobs/s arrive, 2.0/s complete" in scaler.last.reason


def test_no_rates_before_half_a_window():
    scaler = Scaler(settings=ScaleSettings(minimum=1, maximum=4, target_wait=4.0, cooldown=9.0),
                    concurrency=4, queues=None, alias="default", interval=1.0,
                    measure=lambda alias, queues: reading(0, 0, {}), clock=lambda: 0.0,
                    after_look=lambda: None)
    assert scaler._rates(0.0, reading(0, 0, {})) == (None, None)
    assert scaler._rates(1.0, reading(5, 0, {})) == (None, None)
    arrivals, completions = scaler._rates(2.0, reading(10, 0, {}))
    assert (arrivals, completions) == (5.0, 0.0)
