"""Waiting for a ``django.tasks`` result of SQLQueueBackend (``backend.wait_finished`` and
``await_finished``; Django has no wait API of its own): the result comes back refreshed once a
real worker finished the task; ``return_value`` raises for a failed one, as Django's does."""

import threading

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from asgiref.sync import async_to_sync  # noqa: E402
from django.db import connections  # noqa: E402
from django.tasks import TaskResultStatus  # noqa: E402

from django_sqlqueue.backend import await_finished, wait_finished  # noqa: E402
from django_sqlqueue.exceptions import WaitTimeout  # noqa: E402
from django_sqlqueue.waiting import listener  # noqa: E402
from tests.testapp import django_tasks as tasks  # noqa: E402

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]
FAST = {"POLL_INTERVAL_SECONDS": 0.2, "MAINTENANCE_INTERVAL_SECONDS": 0.5}


@pytest.fixture(autouse=True)
def _listeners_closed():
    yield
    listener.stop_all()


def test_wait_finished_returns_the_refreshed_result(start_worker):
    result = tasks.add.enqueue(20, 22)
    waited = {}

    def wait():
        try:
            waited["result"] = wait_finished(result, timeout=120)
        finally:
            connections.close_all()

    waiting = threading.Thread(target=wait)
    waiting.start()
    start_worker(settings=FAST)
    waiting.join(240)
    assert waited["result"] is result
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 42


def test_await_finished_and_a_failed_task(start_worker):
    result = tasks.fails_once_by_default.enqueue("no")
    start_worker(settings=FAST)
    async_to_sync(await_finished)(result, timeout=120)
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018 - Django's property raises


def test_the_timeout_raises_while_nobody_runs_the_task():
    result = tasks.add.enqueue(1, 1)
    with pytest.raises(WaitTimeout):
        wait_finished(result, timeout=0.2)
    assert result.status == TaskResultStatus.READY
