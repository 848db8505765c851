"""``manage.py stats`` as a user runs it: a subprocess, printing a table, JSON, or refreshing."""

import datetime as dt
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest
from django.utils import timezone

from django_sqlqueue.statuses import JobStatus
from tests.factories import JobFactory, WorkerFactory
from tests.process.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


def env_for(db_url):
    # PYTHONFAULTHANDLER: a command that hangs can be made to show where (_where_it_hangs).
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": db_url(),
            "PYTHONFAULTHANDLER": "1"}


def stats(*args, db_url):
    return subprocess.run([sys.executable, "-m", "django", "stats", *args], cwd=ROOT,
                          env=env_for(db_url), capture_output=True, text=True, timeout=120)


@pytest.fixture
def queues():
    """Queue "default": 2 due (the oldest 5 minutes late), 1 scheduled, 1 running, 1 retrying,
    3 jobs done in the last minutes, a live worker. Queue "emails": 1 due, nobody serves it."""
    now = timezone.now()
    JobFactory.create_batch(2, run_at=now - dt.timedelta(minutes=5))
    JobFactory(run_at=now + dt.timedelta(hours=1))
    JobFactory(running=True, run_at=now)
    JobFactory(failed=True, run_at=now + dt.timedelta(minutes=2))
    JobFactory.create_batch(2, succeeded=True, run_at=now - dt.timedelta(minutes=2))
    JobFactory(exhausted=True, run_at=now - dt.timedelta(minutes=3))
    JobFactory(queue="emails", run_at=now - dt.timedelta(seconds=30))
    JobFactory(status=JobStatus.WAITING, run_at=now - dt.timedelta(minutes=9))  # not lag
    WorkerFactory(queues=["default"], concurrency=4)


def test_a_table_per_queue(db_url, queues):
    done = stats(db_url=db_url)
    assert done.returncode == 0, done.stderr
    head, columns, default, emails, *notes = done.stdout.splitlines()
    assert "1 live worker, 4 slots" in head
    assert columns.split() == ["QUEUE", "QUEUED", "SCHEDULED", "WAITING", "RUNNING", "RETRYING",
                               "EXHAUSTED", "LAG", "DONE/MIN", "1H", "FAILED", "1H", "WORKERS"]
    cells = default.split()
    assert cells[:7] == ["default", "2", "1", "1", "1", "1", "1"]
    assert cells[7:9] == ["5", "m"]  # lag
    # 3 jobs over 5 minutes and the seconds of this one so far; 3 in the hour, 1 failed.
    assert cells[-4] in ("0.5", "0.6") and cells[-3:] == ["3", "1", "1"]
    assert emails.split()[:2] == ["emails", "1"] and emails.split()[-1] == "0"
    assert "!" in emails
    assert notes == ["! queue emails: jobs are due and no live worker takes it"]


def test_json_for_scripts(db_url, queues):
    done = stats("--json", db_url=db_url)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert set(document) == {"taken_at", "database", "replica", "estimated", "minute_start",
                             "queues", "workers", "autoscale"}
    scaling = document["autoscale"]  # docs/autoscaling.md: 4 jobs on a 4-slot worker, and the
    # oldest due job 5 minutes late: one process more than the live one
    assert (scaling["desired_processes"], scaling["live_processes"], scaling["live_slots"],
            scaling["busy_share"], scaling["due"], scaling["running"]) == (2, 1, 4, 0.25, 3, 1)
    default, emails = document["queues"]
    assert default["counts"] == {"queued": 2, "scheduled": 1, "waiting": 1, "running": 1,
                                 "succeeded": 2,
                                 "failed": 1, "exhausted": 1, "cancelled": 0, "expired": 0}
    assert 290 < default["lag_seconds"] < 400
    assert default["throughput"]["1h"] == {"succeeded": 2, "exhausted": 1, "cancelled": 0,
                                           "expired": 0}
    assert sum(map(sum, default["per_minute"])) == 3 and len(default["per_minute"]) == 60
    assert emails["unserved"] is True and default["unserved"] is False
    assert [w["state"] for w in document["workers"]] == ["alive"]


def read_until(stream_fd, predicate, timeout=60):
    """Bytes read from ``stream_fd`` until ``predicate(text so far)``."""
    text, deadline = b"", time.monotonic() + timeout
    while not predicate(text.decode(errors="replace")):
        assert time.monotonic() < deadline, f"timed out; read so far: {text!r}"
        ready, _, _ = select.select([stream_fd], [], [], 1)
        if ready:
            chunk = os.read(stream_fd, 65536)
            assert chunk, f"the command exited; read so far: {text!r}"
            text += chunk
    return text.decode(errors="replace")


def interrupt(proc, stream_fd=None) -> str:
    """Ctrl-C, then what the process still writes until it exits (read, so that a full pipe or
    terminal cannot block it); fails unless it exits with status 0."""
    proc.send_signal(signal.SIGINT)
    if stream_fd is None:
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("still running a minute after Ctrl-C; where it was:\n"
                                 + _where_it_hangs(proc)) from None
        assert proc.returncode == 0, err
        return err.decode()
    deadline = time.monotonic() + 60
    while proc.poll() is None:
        if time.monotonic() >= deadline:
            raise AssertionError("still running a minute after Ctrl-C; where it was:\n"
                                 + _where_it_hangs(proc))
        if select.select([stream_fd], [], [], 0.2)[0]:
            try:
                os.read(stream_fd, 65536)
            except OSError:  # the terminal's other end closed
                break
    assert proc.wait(timeout=60) == 0
    return ""


def _where_it_hangs(proc) -> str:
    """The stack of every thread of ``proc`` (started with PYTHONFAULTHANDLER: SIGABRT makes it
    print them to its stderr, then ends it)."""
    proc.send_signal(signal.SIGABRT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err.decode(errors="replace")


def test_watch_prints_plain_tables_when_not_on_a_terminal_and_stops_on_ctrl_c(db_url, queues):
    proc = subprocess.Popen([sys.executable, "-m", "django", "stats", "--watch", "0.2"],
                            cwd=ROOT, env=env_for(db_url), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        text = read_until(proc.stdout.fileno(), lambda t: t.count("QUEUE ") >= 3)
    finally:
        errors = interrupt(proc)
    assert "\x1b" not in text  # no terminal codes in a log
    assert "Traceback" not in errors


def test_watch_redraws_in_place_on_a_terminal(db_url, queues):
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "django", "stats", "--watch", "0.2"],
                            cwd=ROOT, env=env_for(db_url), stdout=child, stderr=subprocess.PIPE)
    os.close(child)
    try:
        text = read_until(main, lambda t: t.count("\x1b[H\x1b[J") >= 2 and "WORKERS" in
                          t.rpartition("\x1b[H\x1b[J")[2])
    finally:
        interrupt(proc, main)
        os.close(main)
    assert "default" in text.rpartition("\x1b[H\x1b[J")[2]


def test_watch_json_is_one_document_per_line(db_url, queues):
    proc = subprocess.Popen([sys.executable, "-m", "django", "stats", "--watch", "0.2",
                             "--json"], cwd=ROOT, env=env_for(db_url), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        text = read_until(proc.stdout.fileno(), lambda t: t.count("\n") >= 2)
    finally:
        interrupt(proc)
    first, second = (json.loads(line) for line in text.splitlines()[:2])
    assert first["queues"][0]["name"] == second["queues"][0]["name"] == "default"
    assert first["taken_at"] < second["taken_at"]


@pytest.mark.parametrize("args, message", [
    (["--watch", "0"], "--watch takes a number of seconds more than 0, not 0 (for example "
                       "--watch 2)."),
    (["--database", "nope"], "--database 'nope' is not in settings.DATABASES"),
])
def test_bad_options_are_one_line_naming_the_fix(db_url, args, message):
    done = stats(*args, db_url=db_url)
    assert done.returncode != 0
    assert message in done.stderr and "Traceback" not in done.stderr
