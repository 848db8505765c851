"""worker/resilience.call_with_retry: transient database errors are retried with backoff, never
waiting longer than its max_delay (a heartbeat's retries must come well inside a lease)."""

import pytest
from django.db import OperationalError

from django_sqlqueue.worker import resilience


def test_retries_back_off_up_to_max_delay(monkeypatch):
    slept = []
    monkeypatch.setattr(resilience.time, "sleep", slept.append)
    monkeypatch.setattr(resilience, "drop_connection", lambda alias: None)
    failures = iter(range(6))

    def flaky():
        if next(failures, None) is not None:
            raise OperationalError("server closed the connection unexpectedly")
        return "renewed"

    assert resilience.call_with_retry(flaky, alias="default", what="heartbeat",
                                      max_delay=0.8) == "renewed"
    assert slept == [0.5, 0.8, 0.8, 0.8, 0.8, 0.8]


def test_the_default_backoff_doubles_to_ten_seconds(monkeypatch):
    slept = []
    monkeypatch.setattr(resilience.time, "sleep", slept.append)
    monkeypatch.setattr(resilience, "drop_connection", lambda alias: None)
    failures = iter(range(7))

    def flaky():
        if next(failures, None) is not None:
            raise OperationalError("gone")

    resilience.call_with_retry(flaky, alias="default", what="claiming")
    assert slept == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_it_gives_up_once_stopped(monkeypatch):
    monkeypatch.setattr(resilience.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(resilience, "drop_connection", lambda alias: None)

    def gone():
        raise OperationalError("gone")

    with pytest.raises(OperationalError):
        resilience.call_with_retry(gone, alias="default", what="x", stop=lambda: True)
