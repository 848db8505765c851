"""The worker process one step at a time: claims into free slots, --burst's exit, and a signal
that arrives while a recycle is decided."""

import io
import os
import signal
import threading
import time

import pytest
from django.db import OperationalError, connections

from django_sqlqueue.claim.limited import QueueControls, read_controls
from django_sqlqueue.db import outages
from django_sqlqueue.models import Job, Queue
from django_sqlqueue.run import runner
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker import fetcher as fetcher_module
from django_sqlqueue.worker.config import WorkerConfig
from django_sqlqueue.worker.process import RECYCLE_EXIT_CODE, WorkerProcess
from tests.conftest import VENDOR
from tests.support.server_side import end_connection
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import add, record, sleep_for

pytestmark = pytest.mark.django_db(transaction=True)


def worker(**options):
    return WorkerProcess(WorkerConfig(name="t", poll_interval=0.05, **options), out=io.StringIO())


def test_sigterm_after_a_recycle_was_decided_exits_instead_of_restarting():
    process = worker(max_jobs=1)
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        process._install_signal_handlers()  # what run() does first
        process.fetcher.recycle_reason = "ran 1 jobs (--max-jobs)"  # decided: exit 75, replaced
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
    recycling.fetcher.recycle_reason = "ran 1 jobs (--max-jobs)"
    assert recycling.exit_code() == RECYCLE_EXIT_CODE  # no signal: replaced


def test_one_step_claims_into_the_free_slots_and_burst_stops_when_nothing_is_left():
    jobs = [add.enqueue(n, n) for n in range(3)]
    process = worker(concurrency=2, burst=True)
    process.pool.start()
    process.writer.start()
    try:
        assert process.fetcher.step() is True
        assert len(process.pool.held()) + Job.objects.filter(
            status=JobStatus.SUCCEEDED).count() >= 2
        while process.fetcher.step():
            process.wakeup.wait()
        assert "burst: nothing left to do" in process.out.getvalue()
    finally:
        process.pool.stop(wait=10)
        process.writer.stop()
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
    assert Job.objects.count() == len(jobs)


def test_a_freed_slot_claims_at_once_only_while_jobs_may_wait_for_a_slot():
    # The pool's threads are not started: claimed jobs stay held, and the test frees "slots" by
    # calling what the pool calls. A claim that found fewer jobs than slots emptied the queue:
    # a slot freed after it claims nothing new, so it does not wake the fetcher (new jobs do).
    process = worker(concurrency=2, async_concurrency=0)
    add.enqueue(1, 1)
    assert process.fetcher.step() is True
    assert len(process.pool.held()) == 1  # one job for two slots
    process.wakeup.event.clear()
    process._slot_freed()
    assert not process.wakeup.event.is_set()
    # A claim that filled the slots may have left jobs behind: a freed slot claims at once.
    for n in range(3):
        add.enqueue(n, n)
    assert process.fetcher.step() is True
    assert len(process.pool.held()) == 2  # the last slot filled; two jobs left queued
    process.wakeup.event.clear()
    process._slot_freed()
    assert process.wakeup.event.is_set()
    # With no slot free the claim is skipped, and is owed to the next freed slot.
    process.fetcher.owes_claim = False
    assert process.fetcher.step() is True
    process.wakeup.event.clear()
    process._slot_freed()
    assert process.wakeup.event.is_set()
    # A limited queue may hold back jobs that a freed slot lets through: claimed for always.
    Queue.objects.create(name="default", concurrency_limit=3)  # 2 running: 1 more may start
    process.fetcher.controls = QueueControls(read_at=-float("inf"))  # read at the next claim
    for entry in process.pool.held():
        process.pool.forget(entry.job)  # both slots free; the rows stay running
    assert process.fetcher.step() is True
    assert len(process.pool.held()) == 1  # the limit let one through, for two slots
    process.wakeup.event.clear()
    process._slot_freed()
    assert process.wakeup.event.is_set()
    # --burst ends once the pool is idle: every freed slot wakes it to look.
    burst = worker(concurrency=2, burst=True)
    burst.fetcher.owes_claim = False
    burst.wakeup.event.clear()
    burst._slot_freed()
    assert burst.wakeup.event.is_set()


def test_a_job_released_for_waiting_too_long_and_claimed_again_at_once_runs_once(monkeypatch):
    # The fetcher releases a job claimed ahead that waited too long for a thread, and its very
    # next claim may take the same row again. The released claim is still in the threads' inbox:
    # it must be skipped, and the new claim run, once.
    long_job = sleep_for.enqueue(0, tag="long")
    waiting = record.enqueue(tag="short")
    gate = threading.Event()
    run = runner.run

    def gated_run(job):  # holds the only thread on the long job until the test lets it go
        if job.pk == long_job.pk:
            assert gate.wait(60)
        return run(job)

    monkeypatch.setattr(runner, "run", gated_run)
    monkeypatch.setattr(fetcher_module, "CLAIMED_AHEAD_MAX_WAIT", 0)
    process = worker(concurrency=1, async_concurrency=0)  # thread slots only
    process.pool.mean_duration = 0.001  # recent jobs were short: claim ahead of the thread
    results = []
    process.pool.on_result = results.append
    process.pool.start()
    process.writer.start()
    try:
        assert process.fetcher.step() is True  # claims both; the thread takes the long job
        wait_until(lambda: [e.job.pk for e in process.pool.held() if e.started_at]
                   == [long_job.pk], what="the long job to start, alone")
        assert process.fetcher.step() is True  # releases the waiting job, and claims it again
        assert Job.objects.get(pk=waiting.pk).attempts == 2  # the new claim's attempt
        gate.set()
        wait_until(lambda: process.pool.is_idle() and not process.writer.pending(),
                   what="both jobs to run and their outcomes to be written")
    finally:
        gate.set()
        process.pool.stop(wait=10)
        process.writer.stop()
    assert Job.objects.get(pk=waiting.pk).status == JobStatus.SUCCEEDED
    assert list(Execution.objects.filter(job_id=waiting.pk).values_list("attempt", flat=True)) \
        == [2]  # run once, by the new claim
    assert sorted((r.job.pk, r.outcome) for r in results) == [
        (long_job.pk, "succeeded"), (waiting.pk, "succeeded")]
    assert process.pool.unwritten() == 0
    assert process.pool.free_slots() == process.pool.capacity()




@pytest.mark.server_database
@pytest.mark.skipif(VENDOR == "pgbouncer", reason="the pooler hides which server connection a "
                    "client has: runs in the postgresql pass")
def test_the_jobs_of_a_claim_whose_reply_was_lost_are_given_back_at_the_next_claim():
    """A claim that committed while its reply was lost (the server restarted, or the connection
    broke, between its commit and the worker's read): the worker never holds its jobs, which the
    database has running under its name. Its next claim gives them back, released, and runs
    them: no attempt used, no interruption counted. Left to their leases, they were rescued as
    interrupted by a lost worker (a restart charged them one of their max_interruptions:
    tests/tasks_backend/test_kills.py)."""
    job = add.enqueue(2, 3)
    process = WorkerProcess(WorkerConfig(name="t", concurrency=1, poll_interval=60),
                            out=io.StringIO())  # the controls just read stay fresh
    process.pool.start()
    process.writer.start()
    try:
        lost, = Job.objects.claim(None, process.worker_id, limit=1)  # committed, reply lost
        process.fetcher.controls = read_controls(Queue, "default")  # the claim: first query
        end_connection()  # the fetcher's connection, which the claim's reply never came back on
        with pytest.raises(outages.CONNECTION_ERRORS):
            process.fetcher.step()
        connections["default"].close()  # what the fetch loop does after it
        assert process.fetcher.step() is True
        ran = wait_until(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.SUCCEEDED)
                         .first(), what="the job to run, given back", timeout=30)
    finally:
        process.pool.stop(wait=10)
        process.writer.stop()
    assert (ran.interruptions, ran.errors, ran.result) == (0, [], 5)
    assert (ran.attempts, ran.max_attempts) == (2, lost.max_attempts + 1)  # one given back


def _claims_failing(process, monkeypatch, failures):
    """The fetch loop with ``failures`` claims in a row failing as on an ended connection, then
    stopping; the delays it waited, in order."""
    left = iter(range(failures))

    def step():
        if next(left, None) is None:
            return False
        raise OperationalError("terminating connection due to administrator command")

    delays = []
    monkeypatch.setattr(process.fetcher, "step", step)
    monkeypatch.setattr(process.stopping, "wait", delays.append)
    process.fetcher.run()
    return delays


def test_claims_whose_connections_were_ended_while_the_database_answers_wait_the_first_delay(
        monkeypatch):
    """An operator or a failover ending the workers' connections, again and again: each claim
    that failed on its ended connection is tried again after the first delay, as the database
    answers on a new one; doubled through such a run, the wait reached 10 s, and the fleet sat
    idle that long once the database was left alone (test_database_outages' terminations)."""
    assert _claims_failing(worker(), monkeypatch, 6) == [0.5] * 6


def test_claims_while_the_database_is_unreachable_wait_longer_each_time(monkeypatch):
    monkeypatch.setattr(fetcher_module.outages, "reachable", lambda alias: False)
    process = worker()
    assert _claims_failing(process, monkeypatch, 6) == [0.5, 1, 2, 4, 8, 10]
    assert not process.pool.gate.is_open()


def test_burst_prints_its_status_only_when_it_changed(monkeypatch):
    # A burst run waiting on one long job printed "progress: ..." every 2 s, the same line each
    # time, under the word report_progress uses for a job's own progress.
    long_job = sleep_for.enqueue(0, tag="long")
    gate = threading.Event()
    run = runner.run

    def gated_run(job):
        assert gate.wait(60)
        return run(job)

    monkeypatch.setattr(runner, "run", gated_run)
    process = worker(concurrency=1, burst=True)
    process.pool.start()
    process.writer.start()
    now = [time.monotonic()]  # the fetcher's clock, moved by hand
    try:
        for _ in range(5):  # 15 s by the fetcher's clock, the job still running
            now[0] += 3
            assert process.fetcher.step(clock=lambda: now[0]) is True
        gate.set()
        wait_until(lambda: Job.objects.get(pk=long_job.pk).status == JobStatus.SUCCEEDED,
                   what="the job to finish")
        while process.fetcher.step(clock=lambda: now[0]):
            process.wakeup.wait()
    finally:
        gate.set()
        process.pool.stop(wait=10)
        process.writer.stop()
    lines = process.out.getvalue().splitlines()
    assert lines == ["burst: attempts_run=0 ready=0 unfinished=1",
                     "burst: attempts_run=1 ready=0 unfinished=0",
                     "burst: nothing left to do, exiting"]


def test_a_heartbeat_after_the_shutdown_unregistered_the_worker_does_not_register_it_again():
    """CI saw a stopped embedded worker still listed: its heartbeat, late on a loaded machine,
    found the row the shutdown had deleted and registered the worker again."""
    from django_sqlqueue.models import Worker

    process = worker()
    process._register()
    Worker.objects.filter(name=process.worker_id).delete()
    process.heartbeat.run_once()  # reaped while unreachable: registered again
    assert Worker.objects.filter(name=process.worker_id).exists()
    process.stopping.set()  # the shutdown began...
    Worker.objects.filter(name=process.worker_id).delete()  # ...and unregistered it
    process.heartbeat.run_once()
    assert not Worker.objects.filter(name=process.worker_id).exists()
