"""worker/resilience.call_with_retry: transient database errors are retried with backoff, never
waiting longer than its max_delay (a heartbeat's retries must come well inside a lease)."""

import pytest
from django.db import InternalError, OperationalError

from django_sqlqueue.worker import resilience


@pytest.fixture
def slept(monkeypatch):
    """The waits between tries, recorded instead of slept."""
    waits = []
    monkeypatch.setattr(resilience.time, "sleep", waits.append)
    monkeypatch.setattr(resilience, "drop_connection", lambda alias: None)
    return waits


def failing(times):
    """A call that raises a transient error ``times`` times, then returns "done"."""
    left = iter(range(times))

    def call():
        if next(left, None) is not None:
            raise OperationalError("server closed the connection unexpectedly")
        return "done"

    return call


def test_retries_back_off_up_to_max_delay(slept):
    assert resilience.call_with_retry(failing(6), alias="default", what="heartbeat",
                                      max_delay=0.8) == "done"
    assert slept == [0.5, 0.8, 0.8, 0.8, 0.8, 0.8]


def test_the_default_backoff_doubles_to_ten_seconds(slept):
    resilience.call_with_retry(failing(7), alias="default", what="claiming")
    assert slept == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_it_gives_up_once_stopped(slept):
    with pytest.raises(OperationalError):
        resilience.call_with_retry(failing(1), alias="default", what="x", stop=lambda: True)


def test_a_connection_out_of_step_with_the_server_is_ridden_out(slept):
    """psycopg's InternalError "received 2 results from command 'BEGIN'", as Django raises it:
    a connection that read more replies than it sent commands, after PostgreSQL restarted
    behind PgBouncer. It ended the worker's process at its claim, before."""
    left = iter(range(1))

    def call():
        if next(left, None) is not None:
            raise InternalError("received 2 results from command 'BEGIN'")
        return "done"

    assert resilience.call_with_retry(call, alias="default", what="claiming") == "done"
    assert slept == [0.5]
