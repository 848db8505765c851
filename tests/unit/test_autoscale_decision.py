"""The autoscaler's decision, called directly: a pure function of measurements and settings."""

from django_sqlqueue.observability.autoscale import (
    GROW,
    HOLD,
    SHRINK,
    Measurements,
    QueueLoad,
    ScalerState,
    ScaleSettings,
    decide,
    desired_processes,
)

SETTINGS = ScaleSettings(minimum=1, maximum=4, target_wait=5.0, cooldown=30.0)


def look(at, processes, *, due=0, running=0, age=None, concurrency=2, arrivals=None,
         completions=None):
    busy = running / (processes * concurrency) if processes else 0.0
    return Measurements(at=at, processes=processes, concurrency=concurrency,
                        queues=(QueueLoad("default", due=due, running=running,
                                          oldest_due_age=age),),
                        busy_share=min(busy, 1.0), arrivals_per_second=arrivals,
                        completions_per_second=completions)


def run(looks, processes, settings=SETTINGS):
    """Apply each decision as a scaler would; return the decisions and the changes."""
    state, decisions, changes = ScalerState(), [], 0
    for at, kwargs in looks:
        decision = decide(look(at, processes, **kwargs), settings, state)
        decisions.append(decision)
        changes += decision.desired != processes
        processes, state = decision.desired, decision.state
    return decisions, changes, processes


def test_a_burst_grows_to_the_maximum_in_one_step():
    decision = decide(look(0, 1, due=100, running=2, age=6.0), SETTINGS)
    assert (decision.desired, decision.action) == (4, GROW)
    assert "oldest due job waited 6.0s (target 5s)" in decision.reason


def test_a_burst_younger_than_the_target_does_not_grow_yet():
    decision = decide(look(0, 1, due=100, running=2, age=1.0), SETTINGS)
    assert (decision.desired, decision.action) == (1, HOLD)


def test_arrivals_outpacing_completions_grow_before_the_target_wait():
    decision = decide(look(0, 1, due=3, running=2, age=3.0, arrivals=10.0, completions=4.0),
                      SETTINGS)
    assert (decision.desired, decision.action) == (3, GROW)
    assert "10.0 jobs/s arrive, 4.0/s complete" in decision.reason


def test_waiting_grows_one_more_only_once_per_target_wait():
    first = decide(look(0, 1, due=1, running=2, age=6.0), SETTINGS)
    assert first.desired == 2
    # A second later the new process has not claimed yet: the job still waits. Hold.
    second = decide(look(1, 2, due=1, running=2, age=7.0), SETTINGS, first.state)
    assert (second.desired, second.action) == (2, HOLD)
    third = decide(look(5, 2, due=1, running=4, age=11.0), SETTINGS, second.state)
    assert (third.desired, third.action) == (3, GROW)


def test_a_steady_trickle_does_not_flap():
    # A job arrives every second and runs for half of one: at each look, maybe one due (young),
    # maybe one running. For ten minutes.
    looks = [(t, {"due": t % 2, "running": (t + 1) % 2, "age": 0.4 if t % 2 else None,
                  "arrivals": 1.0, "completions": 1.0 if t % 3 else 0.0})
             for t in range(0, 600, 2)]
    decisions, changes, processes = run(looks, 1)
    assert changes == 0 and processes == 1
    assert all(d.action == HOLD for d in decisions)


def test_a_trickle_above_the_minimum_shrinks_once_then_holds():
    looks = [(t, {"due": 0, "running": 1}) for t in range(0, 600, 2)]
    decisions, changes, processes = run(looks, 2)
    assert (changes, processes) == (1, 1)
    (shrink,) = [d for d in decisions if d.action == SHRINK]
    assert "cool-down 30s" in shrink.reason


def test_shrinks_one_step_per_cooldown_after_idle():
    looks = [(t, {}) for t in range(0, 200, 2)]
    decisions, changes, processes = run(looks, 4)
    shrinks = [(i * 2, d.desired) for i, d in enumerate(decisions) if d.action == SHRINK]
    assert shrinks == [(30, 3), (60, 2), (90, 1)]
    assert processes == 1


def test_work_in_between_restarts_the_cooldown():
    looks = ([(t, {}) for t in range(0, 20, 2)] + [(20, {"due": 8, "running": 0, "age": 0.5})]
             + [(t, {}) for t in range(22, 60, 2)])
    decisions, changes, processes = run(looks, 2)
    assert [i * 2 for i, d in enumerate(decisions) if d.action == SHRINK] == [52]


def test_busy_processes_are_never_retired():
    # Every slot busy, no job waiting: the processes are needed.
    looks = [(t, {"running": 8}) for t in range(0, 300, 2)]
    _, changes, processes = run(looks, 4)
    assert (changes, processes) == (0, 4)


def test_a_burst_then_idle_goes_to_max_and_back_to_min():
    looks = ([(0, {"due": 50, "running": 2, "age": 6.0})]
             + [(t, {"running": 8, "due": 10, "age": 1.0}) for t in range(2, 20, 2)]
             + [(t, {}) for t in range(20, 200, 2)])
    decisions, changes, processes = run(looks, 1)
    assert decisions[0].desired == 4
    assert [d.desired for d in decisions if d.action != HOLD] == [4, 3, 2, 1]
    assert processes == 1


def test_out_of_bounds_counts_are_brought_back():
    assert decide(look(0, 0), SETTINGS).desired == 1
    assert decide(look(0, 6, running=12), SETTINGS).desired == 4


def test_the_stateless_formula():
    # Every job present on a slot...
    assert desired_processes(look(0, 1, due=5, running=2, age=1.0), SETTINGS) == 4
    assert desired_processes(look(0, 2, due=0, running=3), SETTINGS) == 2
    # ...one more than now when the oldest waits past the target...
    assert desired_processes(look(0, 2, due=1, running=4, age=9.0), SETTINGS) == 3
    # ...and zero when nothing is there, if the minimum allows it.
    zero = ScaleSettings(minimum=0, maximum=10, target_wait=5.0, cooldown=30.0)
    assert desired_processes(look(0, 3), zero) == 0
    assert desired_processes(look(0, 0, due=1, age=0.0), zero) == 1
