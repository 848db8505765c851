"""``manage.py stats --watch`` ends at Ctrl-C wherever the signal lands, in the process itself
(the subprocess tests are tests/process/test_stats_command.py)."""

import io
import os
import signal
import sys
import threading

import pytest
from django.core.management import call_command

from django_sqlqueue.management.commands.stats import Command, ctrl_c_sets

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(60)]


class SendsCtrlCWhenCollected:
    """An object whose finalizer sends this process SIGINT and runs on meanwhile: the signal's
    handler runs inside the finalizer, as when the garbage collector finalizes a model instance
    at the moment Ctrl-C arrives."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):  # the handler runs at one of these steps, still in here
            pass


def test_a_ctrl_c_that_lands_in_a_finalizer_still_ends_watch(monkeypatch):
    """A KeyboardInterrupt raised inside a finalizer is printed as "Exception ignored" and
    lost: --watch relied on it, and went on redrawing after its Ctrl-C (CI, three times)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGINT reaches the main thread only")
    draws = []
    draw = Command._show

    def show(self, *args):
        draws.append(1)
        assert len(draws) < 50, "the Ctrl-C was lost: --watch went on drawing"
        if len(draws) == 1:
            SendsCtrlCWhenCollected()  # collected at once: its finalizer runs here
        return draw(self, *args)

    monkeypatch.setattr(Command, "_show", show)
    before = signal.getsignal(signal.SIGINT)
    out = io.StringIO()
    call_command("stats", "--watch", "0.01", stdout=out)
    assert len(draws) == 1  # the draw under way finishes; no other starts
    assert out.getvalue().count("QUEUE ") == 1
    assert signal.getsignal(signal.SIGINT) is before  # Ctrl-C handled as before the command


def test_a_ctrl_c_that_lands_anywhere_in_the_wait_between_draws_ends_it():
    """The handler runs in the main thread between any two lines, here inside the wait between
    two draws: injected at each line of it in turn (a trace function calls it where the signal
    would). A threading.Event's set(), called from inside its own wait(), waited for the lock
    that wait() held: --watch hung for ever after its Ctrl-C (CI, Django 5.2)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGINT reaches the main thread only")
    for at in range(1, 30):
        with ctrl_c_sets() as stopped:
            handler = signal.getsignal(signal.SIGINT)
            lines = 0

            def trace(frame, event, arg, handler=handler, at=at):
                nonlocal lines
                if event == "line":
                    lines += 1
                    if lines == at:
                        handler(signal.SIGINT, frame)  # as the signal would, at this line
                return trace

            sys.settrace(lambda frame, event, arg: trace)  # every frame the wait enters
            try:
                ended = stopped.wait(30)
            finally:
                sys.settrace(None)
            assert ended, f"the Ctrl-C at line {at} of the wait did not end it"
