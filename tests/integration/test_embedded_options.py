"""The embedded worker's setting, its hooks' choices and its start and stop in this process
(the servers themselves: tests/process/test_embedded_worker.py)."""

import asyncio
import logging
from types import SimpleNamespace

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_sqlqueue.embedded import asgi, gunicorn, options, runserver, thread
from django_sqlqueue.models import Worker
from tests.support.waiting import wait_until


def test_off_by_default_and_then_no_hook_starts_anything(settings):
    assert not options.enabled()
    assert thread.start() is None
    gunicorn.post_worker_init(SimpleNamespace())  # reads nothing of gunicorn's while off
    assert thread.current() is None


def test_true_takes_the_defaults_and_a_dict_sets_some(settings):
    settings.SQLQUEUE = {"EMBEDDED_WORKER": True}
    config = options.worker_config()
    assert (config.concurrency, config.queues, config.shutdown_timeout, config.scheduler) == (
        2, None, 20.0, True)
    settings.SQLQUEUE = {"EMBEDDED_WORKER": {"QUEUES": ["emails"], "CONCURRENCY": 3}}
    config = options.worker_config(shutdown_timeout=4)
    assert (config.concurrency, config.queues, config.shutdown_timeout) == (3, ["emails"], 4)


@pytest.mark.parametrize("setting, message", [
    ({"CONCURENCY": 2}, "unknown key(s) CONCURENCY; the valid keys are QUEUES, CONCURRENCY"),
    ({"CONCURRENCY": 0}, "--concurrency must be from 1 to 256, not 0"),
    ({"QUEUES": ["a b"]}, "--queue:"),
])
def test_a_wrong_option_names_itself(settings, setting, message):
    settings.SQLQUEUE = {"EMBEDDED_WORKER": setting}
    with pytest.raises(ImproperlyConfigured, match="EMBEDDED_WORKER") as raised:
        options.worker_config()
    assert message in str(raised.value)


def test_a_setting_of_another_type_is_refused(settings):
    settings.SQLQUEUE = {"EMBEDDED_WORKER": "yes"}
    with pytest.raises(ImproperlyConfigured, match="must be bool or dict, not str"):
        options.enabled()


@pytest.mark.parametrize("argv, environ, serving", [
    (["manage.py", "runserver"], {"RUN_MAIN": "true"}, True),  # the autoreloader's child
    (["manage.py", "runserver"], {}, False),  # its parent, which only restarts the child
    (["manage.py", "runserver", "--noreload"], {}, True),
    (["manage.py", "runworker"], {"RUN_MAIN": "true"}, False),
    (["manage.py", "migrate"], {}, False),
    (["gunicorn"], {}, False),
])
def test_runserver_serves_from_its_child_or_its_only_process(argv, environ, serving):
    assert runserver.serving(argv, environ) is serving


def lifespan(app):
    """Run an ASGI lifespan through ``app``: the messages it sent."""
    sent = []
    incoming = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive():
        return next(incoming)

    async def send(message):
        sent.append(message["type"])

    asyncio.run(app({"type": "lifespan"}, receive, send))
    return sent


def test_the_asgi_wrapper_answers_the_lifespan_while_off(settings):
    async def http_only(scope, receive, send):
        raise AssertionError("Django's application never sees the lifespan")

    assert lifespan(asgi.with_embedded_worker(http_only)) == [
        "lifespan.startup.complete", "lifespan.shutdown.complete"]


def test_a_wrong_option_fails_the_asgi_startup(settings):
    settings.SQLQUEUE = {"EMBEDDED_WORKER": {"CONCURRENCY": 0}}
    assert lifespan(asgi.with_embedded_worker(None)) == ["lifespan.startup.failed"]


@pytest.mark.django_db(transaction=True)
def test_gunicorns_hook_cuts_the_shutdown_timeout_below_its_own_and_stops(settings, caplog):
    settings.SQLQUEUE = {"EMBEDDED_WORKER": {"SHUTDOWN_TIMEOUT_SECONDS": 60},
                         "LEASE_SECONDS": 3, "POLL_INTERVAL_SECONDS": 0.2}
    web_worker = SimpleNamespace(cfg=SimpleNamespace(graceful_timeout=30, timeout=12),
                                 log=logging.getLogger("gunicorn.error"))
    with caplog.at_level(logging.WARNING, "gunicorn.error"):
        gunicorn.post_worker_init(web_worker)
    try:
        running = thread.current()
        assert running.config.shutdown_timeout == 7  # gunicorn's timeout (12) minus 5
        assert "cut from 60s to 7s" in caplog.text
        assert thread.start() is running  # one per process
        wait_until(lambda: Worker.objects.filter(name=running.worker_id).exists(),
                   what="the embedded worker to register")
    finally:
        gunicorn.worker_exit(None, web_worker)
    assert thread.current() is None
    assert not Worker.objects.exists()
