"""The worker process one step at a time: claims into free slots, --burst's exit, and a signal
that arrives while a recycle is decided."""

import io
import os
import signal

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.config import WorkerConfig
from django_sqlqueue.worker.process import RECYCLE_EXIT_CODE, WorkerProcess
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db(transaction=True)


def worker(**options):
    return WorkerProcess(WorkerConfig(name="t", poll_interval=0.05, **options), out=io.StringIO())


def test_sigterm_after_a_recycle_was_decided_exits_instead_of_restarting():
    process = worker(max_jobs=1)
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        process._install_signal_handlers()  # what run() does first
        process.recycle_reason = "ran 1 jobs (--max-jobs)"  # decided: exit 75 to be replaced
        os.kill(os.getpid(), signal.SIGTERM)  # ... and systemd stops the service meanwhile
        assert process.stopping.is_set()
        # Without a supervisor, 75 makes runworker execute itself again: a stopped service
        # would come back.
        assert process.exit_code() == 0
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert worker(max_jobs=1).exit_code() == 0  # no recycle decided: 0
    recycling = worker(max_jobs=1)
    recycling.recycle_reason = "ran 1 jobs (--max-jobs)"
    assert recycling.exit_code() == RECYCLE_EXIT_CODE  # no signal: replaced


def test_one_step_claims_into_the_free_slots_and_burst_stops_when_nothing_is_left():
    jobs = [add.enqueue(n, n) for n in range(3)]
    process = worker(concurrency=2, burst=True)
    process.pool.start()
    process.writer.start()
    try:
        assert process.step() is True
        assert len(process.pool.held()) + Job.objects.filter(
            status=JobStatus.SUCCEEDED).count() >= 2
        while process.step():
            process.wakeup.wait()
        assert "burst: nothing left to do" in process.out.getvalue()
    finally:
        process.pool.stop(wait=10)
        process.writer.stop()
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
    assert Job.objects.count() == len(jobs)
