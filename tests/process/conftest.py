"""Real ``runworker`` subprocesses against the test database."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connections

from django_sqlqueue.models import Job, Worker

ROOT = Path(__file__).resolve().parents[2]


class WorkerProcess:
    def __init__(self, args, env, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")  # a file, not a pipe: a full pipe would block the worker
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "django", "runworker", *args],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,  # its own process group: stop() also reaches its children
        )
        self.pid = self.proc.pid

    @property
    def output(self) -> str:
        self.log.flush()
        return Path(self.log_path).read_text()

    def signal(self, signum):
        self.proc.send_signal(signum)

    def wait(self, timeout=60) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"worker did not exit within {timeout}s:\n{self.output}") from None

    def is_running(self) -> bool:
        return self.proc.poll() is None

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.log.close()


@pytest.fixture
def start_worker(db_url, tmp_path):
    """``start_worker("--burst", settings={"LEASE_SECONDS": 3})`` -> a running WorkerProcess;
    ``env`` adds environment variables."""
    started = []

    def start(*args, settings=None, name=None, env=None):
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": db_url(),
            "SQLQUEUE_TEST_SETTINGS": json.dumps(settings or {}),
            **(env or {}),
        }
        worker = WorkerProcess(
            [*args, "--name", name or f"w{len(started)}"], env,
            tmp_path / f"worker-{len(started)}.log",
        )
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def wait_for(condition, *, timeout=30, interval=0.05, what="condition", worker=None):
    """Poll ``condition()`` (it may query the database) until it is truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        connections.close_all()  # see other processes' commits; survive server restarts
        try:
            value = condition()
        except Exception:  # the database may be restarting
            value = None
        if value:
            return value
        time.sleep(interval)
    log = f"\nworker output:\n{worker.output}" if worker else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}{log}")


def job_status(pk):
    return Job.objects.filter(pk=pk).values_list("status", flat=True).first()


def worker_registered(worker):
    return Worker.objects.filter(pid=worker.pid).exists()
