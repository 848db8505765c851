"""Real ``runworker`` subprocesses against the test database."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

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


def job_status(pk):
    return Job.objects.filter(pk=pk).values_list("status", flat=True).first()


def worker_registered(worker):
    return Worker.objects.filter(pid=worker.pid).exists()
