"""worker/supervisor.Supervisor, one step at a time with stand-in children: a stop signal that
arrives while a child is being started reaches that child too."""

import io
import os
import signal

from django_sqlqueue.worker.supervisor import Supervisor


class Child:
    """Stands in for a child process: records the signals sent to it."""

    def __init__(self, pid):
        self.pid = pid
        self.signals = []

    def send_signal(self, signum):
        self.signals.append(signum)

    def poll(self):
        return None

    def kill(self):
        self.signals.append(signal.SIGKILL)


def test_a_stop_that_arrives_while_a_child_starts_reaches_it():
    started = []

    def start_child():
        if len(started) == 1:  # SIGTERM while the replacement child is being started
            supervisor._on_signal(signal.SIGTERM, None)
        started.append(Child(100 + len(started)))
        return started[-1]

    supervisor = Supervisor(processes=1, start_child=start_child, burst=False,
                            shutdown_timeout=5, out=io.StringIO())
    supervisor._spawn(0)
    supervisor._spawn(0)  # the slot's replacement, as after a crash
    assert [child.signals for child in started] == [[signal.SIGTERM], [signal.SIGTERM]]


class Exiting(Child):
    """A stand-in child that exits (code 0) once it got SIGTERM."""

    def poll(self):
        return 0 if signal.SIGTERM in self.signals else None


def test_autoscale_starts_processes_and_retires_idle_ones_without_restarting():
    import datetime as dt

    from django_sqlqueue.observability.autoscale import QueueLoad, ScaleSettings
    from django_sqlqueue.observability.fleet import Fleet
    from django_sqlqueue.worker.scaler import Scaler

    clock = [0.0]
    readings = [Fleet(dt.datetime.now(dt.UTC), (QueueLoad("default", due=40, running=2,
                                                          oldest_due_age=9.0),))]
    scaler = Scaler(settings=ScaleSettings(minimum=1, maximum=4, target_wait=1.0, cooldown=5.0),
                    concurrency=2, queues=None, alias="default", interval=1.0,
                    measure=lambda alias, queues: readings[-1], clock=lambda: clock[0],
                    after_look=lambda: None, record=lambda **change: kept.append(change))
    kept = []
    started = []

    def start_child():
        started.append(Exiting(100 + len(started)))
        return started[-1]

    out = io.StringIO()
    supervisor = Supervisor(processes=1, start_child=start_child, burst=False,
                            shutdown_timeout=5, out=out, scaler=scaler)
    supervisor._spawn(0)
    supervisor._autoscale()
    assert len(supervisor.children) == 4
    assert "autoscale 1 -> 4: oldest due job waited 9.0s (target 1s)" in out.getvalue()

    # Drained: one job left, run by the youngest process; the others idle.
    readings.append(Fleet(dt.datetime.now(dt.UTC), (QueueLoad("default", running=1),),
                          busy={(scaler.host, 103)}))
    for second in range(1, 30):
        clock[0] = second
        supervisor._autoscale()
        for slot, child in list(supervisor.children.items()):
            if child.poll() is not None:  # as the supervisor's loop does
                del supervisor.children[slot]
                supervisor._child_exited(slot, child, 0)
    assert list(supervisor.children) == [3]  # the busy one stays, though the youngest
    assert len(started) == 4  # none restarted
    assert out.getvalue().count("retired (exit code 0)") == 3
    assert [child.signals for child in started] == [[signal.SIGTERM]] * 3 + [[]]
    assert "autoscale 2 -> 1: slots idle for" in out.getvalue()
    # Each change is kept for the admin dashboard, with this supervisor's host and pid.
    assert [(c["processes_before"], c["processes"], c["action"]) for c in kept] == [
        (1, 4, "grow"), (4, 3, "shrink"), (3, 2, "shrink"), (2, 1, "shrink")]
    assert {(c["host"], c["pid"]) for c in kept} == {(scaler.host, os.getpid())}
    assert kept[0]["reason"].startswith("oldest due job waited 9.0s")


def test_autoscale_changes_its_processes_when_it_cannot_record_the_change():
    import datetime as dt

    from django_sqlqueue.observability.autoscale import QueueLoad, ScaleSettings
    from django_sqlqueue.observability.fleet import Fleet
    from django_sqlqueue.worker.scaler import Scaler

    def record(**change):
        raise OSError("connection refused")

    closed = []
    reading = Fleet(dt.datetime.now(dt.UTC), (QueueLoad("default", due=40, oldest_due_age=9.0),))
    scaler = Scaler(settings=ScaleSettings(minimum=1, maximum=4, target_wait=1.0, cooldown=5.0),
                    concurrency=2, queues=None, alias="default", interval=1.0,
                    measure=lambda alias, queues: reading, after_look=lambda: closed.append(1),
                    record=record)
    out = io.StringIO()
    supervisor = Supervisor(processes=1, start_child=lambda: Child(100), burst=False,
                            shutdown_timeout=5, out=out, scaler=scaler)
    supervisor._spawn(0)
    supervisor._autoscale()
    assert len(supervisor.children) == 4
    assert ("autoscale: could not record the change (OSError: connection refused)"
            in out.getvalue())
    assert len(closed) == 2  # after the look and after the record: no connection at a fork


def test_autoscale_keeps_the_processes_while_it_cannot_measure_and_says_so_once():
    from django_sqlqueue.observability.autoscale import ScaleSettings
    from django_sqlqueue.worker.scaler import Scaler

    def measure(alias, queues):
        raise OSError("connection refused")

    scaler = Scaler(settings=ScaleSettings(minimum=1, maximum=4, target_wait=1.0, cooldown=5.0),
                    concurrency=2, queues=None, alias="default", interval=1.0, measure=measure,
                    after_look=lambda: None, record=lambda **change: None)
    out = io.StringIO()
    supervisor = Supervisor(processes=1, start_child=lambda: Child(100), burst=False,
                            shutdown_timeout=5, out=out, scaler=scaler)
    supervisor._spawn(0)
    for _ in range(3):
        supervisor._autoscale()
    assert list(supervisor.children) == [0]
    assert out.getvalue().count("autoscale: cannot measure (OSError: connection refused); "
                                "keeping 1 process(es) until it can") == 1
