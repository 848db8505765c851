"""The settings and the worker option of async jobs on the event loop, checked at the boundary."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_sqlqueue.conf import get_settings
from django_sqlqueue.worker.config import InvalidWorkerOption, WorkerConfig


@pytest.mark.parametrize("sqlqueue, message", [
    ({"ASYNC_CONCURRENCY": -1}, "ASYNC_CONCURRENCY must be from 0 (async jobs on the threads) "
                                "to 10,000"),
    ({"ASYNC_CONCURRENCY": 20_000}, "ASYNC_CONCURRENCY must be from 0"),
    ({"ASYNC_CONCURRENCY": "100"}, "SQLQUEUE['ASYNC_CONCURRENCY'] must be int"),
    ({"ASYNC_BLOCK_WARNING_SECONDS": 0}, "ASYNC_BLOCK_WARNING_SECONDS must be positive"),
])
def test_bad_async_settings_are_refused(settings, sqlqueue, message):
    settings.SQLQUEUE = sqlqueue
    with pytest.raises(ImproperlyConfigured, match=message.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)")):
        get_settings()


def test_the_worker_takes_its_async_concurrency_from_the_option_or_the_setting(settings):
    settings.SQLQUEUE = {"ASYNC_CONCURRENCY": 7, "ASYNC_BLOCK_WARNING_SECONDS": 2}
    config = WorkerConfig()
    assert (config.async_concurrency, config.block_warning_seconds) == (7, 2)
    assert WorkerConfig(async_concurrency=0).async_concurrency == 0  # the loop off
    with pytest.raises(InvalidWorkerOption, match="--async-concurrency must be from 0"):
        WorkerConfig(async_concurrency=10_001)
