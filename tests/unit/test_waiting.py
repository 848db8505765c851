"""The pieces of waiting that need no database: the timeout checked at the boundary, the
settings of the poll, the poll's back-off, and the listener's dispatch of a notification to the
waiters of its job only."""

import re

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_sqlqueue.conf import get_settings
from django_sqlqueue.waiting.listener import Listener
from django_sqlqueue.waiting.waiter import Poll, check_timeout


@pytest.mark.parametrize("timeout, error, message", [
    (-1, ValueError, "timeout must be 0 or more seconds"),
    (float("nan"), ValueError, "timeout must be 0 or more seconds"),
    ("5", TypeError, "timeout must be a number of seconds, or None"),
    (True, TypeError, "timeout must be a number of seconds, or None"),
])
def test_a_bad_timeout_is_refused_with_the_fix(timeout, error, message):
    with pytest.raises(error, match=message):
        check_timeout(timeout)


def test_good_timeouts():
    assert check_timeout(0) == 0.0 and check_timeout(2.5) == 2.5
    assert check_timeout(None) == float("inf")


@pytest.mark.parametrize("sqlqueue, message", [
    ({"WAIT_POLL_MIN_SECONDS": 0}, "WAIT_POLL_MIN_SECONDS must be positive"),
    ({"WAIT_POLL_MAX_SECONDS": -1}, "WAIT_POLL_MAX_SECONDS must be positive"),
    ({"WAIT_POLL_MIN_SECONDS": 2, "WAIT_POLL_MAX_SECONDS": 1},
     "WAIT_POLL_MIN_SECONDS must not exceed WAIT_POLL_MAX_SECONDS"),
    ({"WAIT_POLL_MAX_SECONDS": "1"}, "SQLQUEUE['WAIT_POLL_MAX_SECONDS'] must be"),
])
def test_bad_poll_settings_are_refused(settings, sqlqueue, message):
    settings.SQLQUEUE = sqlqueue
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        get_settings()


def test_the_poll_doubles_up_to_its_longest_and_a_listening_waiter_takes_the_longest(settings):
    settings.SQLQUEUE = {"WAIT_POLL_MIN_SECONDS": 0.01, "WAIT_POLL_MAX_SECONDS": 0.05}
    poll = Poll()
    assert [poll.next_seconds(listening=False) for _ in range(5)] == [
        0.01, 0.02, 0.04, 0.05, 0.05]
    assert Poll().next_seconds(listening=True) == 0.05


def test_a_notification_wakes_the_waiters_of_its_job_only():
    listener = Listener({}, listen=None)
    woken = []
    # Subscribed by hand: subscribe() would start the thread and connect.
    listener._waiters = {1: {lambda: woken.append("a"), lambda: woken.append("b")},
                         2: {lambda: woken.append("c")}}
    listener.woken("1")
    assert sorted(woken) == ["a", "b"]
    listener.woken("not an id")  # ignored
    listener.woken("3")  # nobody waits
    assert sorted(woken) == ["a", "b"]
