"""``runworker --log-format keyvalue|json``: every line a real worker (and its supervisor)
writes is one line with the stable keys, from the banner to the stop line."""

import json
import re

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.worker import log_format
from tests.testapp.tasks import add, always_fails

pytestmark = pytest.mark.django_db(transaction=True)
FAST = {"LEASE_SECONDS": 3, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.2}
PAIR = re.compile(r'([\w.]+)=("(?:[^"\\]|\\.)*"|[^\s"]*)(?: |$)')


def parse_keyvalue(line: str) -> dict:
    """A logfmt line as a dict; fails unless the whole line is key=value pairs."""
    pairs = PAIR.findall(line)
    assert " ".join(f"{k}={v}" for k, v in pairs) == line, line
    return {key: json.loads(value) if value.startswith('"') else value for key, value in pairs}


@pytest.mark.parametrize("line_format, processes", [("keyvalue", "1"), ("json", "2")])
def test_every_line_of_a_drain_is_structured(start_worker, line_format, processes):
    ok = add.enqueue(1, 2)
    bad = always_fails.using(max_attempts=1).enqueue("boom")
    worker = start_worker("--burst", "--log-format", line_format, "--processes", processes,
                          settings=FAST, env={"SQLQUEUE_TEST_WORKER_LOGGING": "1"})
    assert worker.wait() == 0, worker.output
    parse = json.loads if line_format == "json" else parse_keyvalue
    records = [parse(line) for line in worker.output.splitlines() if line]
    for record in records:
        assert list(record)[:4] == ["ts", "level", "logger", "event"], record
    events = [r["event"] for r in records]
    assert events.count("worker.started") == int(processes), events
    assert events.count("worker.stopped") == int(processes)
    finished = {int(r["job_id"]): r for r in records if r["event"] == "job.finished"}
    assert set(finished) == {ok.pk, bad.pk}
    assert finished[ok.pk]["outcome"] == "succeeded" and finished[ok.pk]["error"] in (None, "")
    assert (finished[bad.pk]["outcome"], finished[bad.pk]["error"]) == ("exhausted",
                                                                        "RuntimeError")
    assert finished[bad.pk]["level"] == "warning"
    # The message, and the traceback of the last attempt, in keys of their own.
    assert finished[bad.pk]["error_message"] == "boom"
    assert "raise RuntimeError(message)" in finished[bad.pk]["exception"]
    assert "exception" not in finished[ok.pk]
    assert finished[ok.pk]["task"] == "tests.testapp.tasks.add"
    stopped = [r for r in records if r["event"] == "worker.stopped"]
    assert sum(int(r["attempts"]) for r in stopped) == 2
    assert sum(int(r["exhausted"]) for r in stopped) == 1
    if processes != "1":
        assert events[0] == "supervisor.started" and events[-1] == "supervisor.stopped"
        assert events.count("supervisor.child_started") == 2
    assert Job.objects.filter(status="succeeded").count() == 1


def test_the_projects_own_handlers_write_the_format_too(start_worker):
    """tests/settings.py gives the package's loggers a console handler at WARNING, as a project
    would: --log-format json sets its format, and its level still holds."""
    add.enqueue(1, 2)
    bad = always_fails.using(max_attempts=1).enqueue("boom")
    worker = start_worker("--burst", "--log-format", "json", settings=FAST)
    assert worker.wait() == 0, worker.output
    records = [json.loads(line) for line in worker.output.splitlines() if line]
    finished = [r for r in records if r["event"] == "job.finished"]
    assert [(r["job_id"], r["level"]) for r in finished] == [(bad.pk, "warning")]  # no INFO
    assert {"worker.started", "worker.stopped"} <= {r["event"] for r in records}


@pytest.mark.parametrize("verbosity", ["1", "2"])
def test_a_failure_line_says_the_error_and_the_last_one_its_traceback(start_worker, verbosity):
    """A user reads why a job failed in the worker's output, not only in the admin: the message
    on every failure line, the traceback for the attempt that ends the job (and at -v 2 for
    every failed attempt)."""
    bad = always_fails.using(max_attempts=2, retry_backoff=0.1,
                             retry_min_delay=0.1).enqueue("card declined")
    worker = start_worker("--burst", "-v", verbosity, settings=FAST,
                          env={"SQLQUEUE_TEST_WORKER_LOGGING": "1"})
    assert worker.wait() == 0, worker.output
    output = worker.output
    failed, exhausted = (f"id={bad.pk} attempt={n} outcome={kind} " for n, kind in
                         ((1, "failed"), (2, "exhausted")))
    lines = output.splitlines()
    [first] = [n for n, text in enumerate(lines) if failed in text]
    [last] = [n for n, text in enumerate(lines) if exhausted in text]
    for n in first, last:
        assert lines[n].endswith(" error=RuntimeError: card declined"), lines[n]
    # The line after each is its traceback, or the next line of the log.
    assert lines[last + 1] == "Traceback (most recent call last):", output
    assert "RuntimeError: card declined" in lines[last + 2:]
    assert (lines[first + 1] == "Traceback (most recent call last):") == (verbosity == "2"), (
        output)


def test_a_traceback_stays_on_its_line():
    import logging
    import sys

    try:
        raise ValueError("bad\nthing")
    except ValueError:
        record = logging.LogRecord("django_sqlqueue.worker.process", logging.ERROR, __file__, 1,
                                   "heartbeat failed; trying again in %gs", (5,), sys.exc_info())
    for line_format, parse in (("json", json.loads), ("keyvalue", parse_keyvalue)):
        line = log_format.Formatter(line_format).format(record)
        assert "\n" not in line
        data = parse(line)
        assert (data["level"], data["event"]) == ("error", "log")
        assert data["message"] == "heartbeat failed; trying again in 5s"
        assert data["exception"].startswith("Traceback") and "ValueError: bad\nthing" in (
            data["exception"])


def test_an_unknown_log_format_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="one of text, keyvalue, json, not 'xml'"):
        log_format.Formatter("xml")
