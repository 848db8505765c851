"""Workers that share a host name but not a process table are never reaped while alive.

Containers with Docker host networking, or pods given the same ``hostname:``, report the same host
name, and a pid of one is meaningless in the other. Two real ``runworker`` processes, each in a
pid namespace of its own (``unshare --pid --fork``, which needs root), with pids that do not
exist in each other's namespace, run long jobs while maintenance makes many passes: neither
worker may be reaped and no job rescued or run twice.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.statuses import JobStatus
from tests.process.conftest import ROOT, WorkerProcess
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import gated

pytestmark = pytest.mark.django_db(transaction=True)
FAST = {"LEASE_SECONDS": 3, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.2}


def _can_unshare() -> bool:
    if sys.platform != "linux" or shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True)
    return probe.returncode == 0


needs_pid_namespaces = pytest.mark.skipif(
    not _can_unshare(), reason="needs root and unshare --pid (Linux)"
)


class NamespacedWorker(WorkerProcess):
    """``runworker`` as the only worker of a fresh pid namespace, after ``skip`` used-up pids."""

    def __init__(self, args, env, log_path, *, skip):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--kill-child",
             sys.executable, "-m", "tests.process.pid_namespace_init", str(skip), "--",
             sys.executable, "-m", "django", "runworker", *args],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
        self.pid = self.proc.pid  # of unshare, in this namespace; the worker's row has its own

    def signal(self, signum):
        """To the namespace's init, which passes it on to the worker (unshare ignores it)."""
        with open(f"/proc/{self.pid}/task/{self.pid}/children") as children:
            (init,) = children.read().split()
        os.kill(int(init), signum)


@pytest.fixture
def start_namespaced(db_url, tmp_path):
    started = []

    def start(name, *args, skip):
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": db_url(),
            "SQLQUEUE_TEST_SETTINGS": json.dumps(FAST),
        }
        worker = NamespacedWorker([*args, "--name", name], env, tmp_path / f"{name}.log",
                                  skip=skip)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def _rows():
    return {row.name.split(":")[0]: row for row in Worker.objects.all()}


@needs_pid_namespaces
def test_workers_sharing_a_host_name_in_other_pid_namespaces_are_not_reaped(start_namespaced,
                                                                            tmp_path):
    # The jobs run until the test opens their gate: they are mid-run through every maintenance
    # pass below however slow the machine (a 7 s sleep had ended before the check on a loaded
    # one).
    gate = tmp_path / "gate"
    jobs = [gated.enqueue(str(gate), tag="finished") for _ in range(2)]
    # The first worker gets pid 2 of its namespace; the second a pid hundreds higher (its
    # threads take the pids after it), so each one's pid is missing from the other's table.
    first = start_namespaced("ns-a", "-c", "1", skip=0)
    second = start_namespaced("ns-b", "-c", "1", skip=400)
    rows = wait_until(lambda: (r := _rows()) and len(r) == 2 and r, what="both workers",
                      worker=second)
    assert rows["ns-a"].host == rows["ns-b"].host  # the same host name...
    assert rows["ns-a"].pid != rows["ns-b"].pid  # ...and pids the other namespace lacks
    # What the reaper judges by: one kernel boot, two pid namespaces.
    assert rows["ns-a"].boot_id == rows["ns-b"].boot_id is not None
    assert rows["ns-a"].pid_namespace != rows["ns-b"].pid_namespace
    running = wait_until(
        lambda: (found := list(Job.objects.filter(pk__in=[job.pk for job in jobs],
                                                  status=JobStatus.RUNNING)))
        and len(found) == 2 and found, what="both jobs running", worker=first)
    assert {job.claimed_by.split(":")[0] for job in running} == {"ns-a", "ns-b"}

    time.sleep(4)  # eight maintenance passes of each worker, more than one lease

    assert {name: row.pk for name, row in _rows().items()} == {
        name: row.pk for name, row in rows.items()
    }, "a live worker's row was reaped (and registered again)"
    for job in Job.objects.filter(pk__in=[job.pk for job in jobs]):
        assert (job.status, job.attempts, job.errors) == (JobStatus.RUNNING, 1, []), job.errors
    gate.touch()
    wait_until(lambda: Job.objects.filter(status=JobStatus.SUCCEEDED).count() == 2,
               what="both jobs done", timeout=60, worker=first)
    for job in jobs:
        assert Execution.objects.filter(job_id=job.pk, tag="finished").count() == 1
    for worker in (first, second):
        assert "reaped dead worker" not in worker.output, worker.output
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output
    assert not Worker.objects.exists()
