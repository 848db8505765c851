"""worker/supervisor.Supervisor, one step at a time with stand-in children: a stop signal that
arrives while a child is being started reaches that child too."""

import io
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
