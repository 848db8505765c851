"""runworker as a real process: draining, graceful shutdown, kills, recycling, timeouts."""

import signal
import time

import pytest
from django.db import connection, transaction

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.queues.control import pause
from django_sqlqueue.statuses import JobStatus
from tests.process.conftest import job_status
from tests.support.waiting import wait_started, wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import add, always_fails, leave_a_lock_held, record, sleep_for

pytestmark = pytest.mark.django_db(transaction=True)
FAST = {"LEASE_SECONDS": 3, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.2}


def test_burst_drains_the_queue_and_exits_zero(start_worker):
    jobs = Job.objects.bulk_enqueue(record.prepare(tag=str(n)) for n in range(50))
    failing = always_fails.using(retry_backoff=0.1, retry_min_delay=0.1).enqueue("nope")
    worker = start_worker("--burst", "--concurrency", "4", settings=FAST)
    assert worker.wait() == 0, worker.output
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == len(jobs)
    assert Job.objects.get(pk=failing.pk).status == JobStatus.EXHAUSTED  # retries were awaited
    assert sorted(Execution.objects.values_list("job_id", flat=True)) == sorted(
        job.pk for job in jobs
    )
    assert "burst: nothing left to do" in worker.output
    # Jobs and attempts apart: the failing job ran three attempts.
    assert ("stopped after 53 attempt(s): 51 job(s) finished (50 succeeded, 1 exhausted), "
            "2 failed attempt(s) to retry") in worker.output
    assert not Worker.objects.exists()  # unregistered on a clean exit


def test_the_registry_shows_a_live_worker_until_it_stops(start_worker):
    worker = start_worker("--queue", "default", "--queue", "emails", "-c", "3", settings=FAST)
    row = wait_until(lambda: Worker.objects.filter(pid=worker.pid).first(), what="worker row")
    assert (row.queues, row.concurrency) == (["default", "emails"], 3)
    first_beat = row.last_heartbeat_at
    add.enqueue(1, 2)
    wait_until(lambda: Worker.objects.get(pid=worker.pid).jobs_done == 1, what="jobs_done")
    assert Worker.objects.get(pid=worker.pid).last_heartbeat_at > first_beat
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert not Worker.objects.filter(pid=worker.pid).exists()


def test_sigterm_lets_the_running_job_finish_then_exits_zero(start_worker):
    job = sleep_for.enqueue(1.5, tag="finished")
    worker = start_worker(settings=FAST)
    wait_started(job.pk, worker)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output
    assert job_status(job.pk) == JobStatus.SUCCEEDED
    assert Execution.objects.filter(job_id=job.pk, tag="finished").count() == 1


def test_past_the_shutdown_timeout_the_job_is_released_uncounted(start_worker):
    job = sleep_for.enqueue(30, tag="finished")
    worker = start_worker("--shutdown-timeout", "0.5", settings=FAST)
    wait_started(job.pk, worker)
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0, worker.output
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED
    assert (job.attempts, job.max_attempts) == (1, 6)  # the attempt was given back
    # Recorded in its history, but not counted towards max_interruptions: a deploy says
    # nothing about the job.
    assert job.interruptions == 0
    (entry,) = job.errors
    assert entry["type"] == "django_sqlqueue.run.outcomes.WorkerStopped" and entry["interrupted"]
    assert entry["message"].endswith(
        "shut down while running attempt 1; the job runs again, the attempt not counted.")


def test_sigkill_mid_job_is_rescued_and_completed_by_another_worker(start_worker):
    job = sleep_for.enqueue(1, tag="finished")
    doomed = start_worker(settings=FAST)
    wait_started(job.pk, doomed)
    doomed.signal(signal.SIGKILL)
    doomed.wait()
    rescuer = start_worker(settings=FAST)
    wait_until(lambda: job_status(job.pk) == JobStatus.SUCCEEDED, what="the re-run",
               worker=rescuer)
    job.refresh_from_db()
    assert job.attempts == 2
    (lost,) = job.errors
    assert lost["attempt"] == 1 and lost["type"].endswith("WorkerLost")
    assert "was lost while running attempt 1" in lost["message"]
    assert Execution.objects.filter(job_id=job.pk, tag="finished").count() == 1
    assert not Worker.objects.filter(pid=doomed.pid).exists()  # the dead worker was reaped


def test_a_frozen_worker_loses_its_lease_and_cannot_overwrite_the_rescue(start_worker):
    job = sleep_for.enqueue(2, tag="finished")
    frozen = start_worker(settings=FAST)
    wait_started(job.pk, frozen)
    frozen.signal(signal.SIGSTOP)  # alive (its pid exists) but silent: only the lease tells
    try:
        rescuer = start_worker(settings=FAST)
        wait_until(lambda: job_status(job.pk) == JobStatus.SUCCEEDED, what="the rescue",
                   worker=rescuer, timeout=40)
    finally:
        frozen.signal(signal.SIGCONT)
    wait_until(lambda: Execution.objects.filter(job_id=job.pk, tag="finished").count() == 2,
               what="the frozen run to end", worker=frozen)
    time.sleep(0.5)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and job.attempts == 2
    assert [e["type"].rsplit(".", 1)[-1] for e in job.errors] == ["WorkerLost"]
    assert "outcome=lost" in frozen.output  # its late complete() was fenced out


def test_max_jobs_recycles_the_process_without_losing_jobs(start_worker):
    jobs = Job.objects.bulk_enqueue(record.prepare(tag=str(n)) for n in range(12))
    worker = start_worker("--burst", "--max-jobs", "5", "-c", "2", settings=FAST)
    assert worker.wait() == 0, worker.output
    assert worker.output.count("recycling: ran 5 jobs") == 2
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
    assert Execution.objects.count() == len(jobs)


def test_a_recycled_process_takes_no_lock_of_its_former_self_along(start_worker):
    """--max-jobs replaces the process with a fresh one (exec, same pid). A transaction that one
    of its threads left open ends with the old process, and its row locks with it: on MariaDB
    the driver's socket survived the exec, so the server kept the session and its locks, and the
    fresh process skipped the jobs they covered (a --burst that never ended)."""
    if connection.vendor == "sqlite":
        pytest.skip("SQLite's locks are the file's, and its descriptors close on exec")
    job = leave_a_lock_held.enqueue()
    worker = start_worker("--max-jobs", "1", "-c", "1", settings=FAST)
    wait_until(lambda: Execution.objects.filter(job_id=job.pk, tag="locked").exists(),
               what="the job to lock its row", worker=worker)
    row = Execution.objects.get(job_id=job.pk, tag="held")

    def unlocked():
        with transaction.atomic():
            return Execution.objects.select_for_update(skip_locked=True).filter(
                pk=row.pk).exists()

    # Locked until the old process is replaced; then free, by construction, or never.
    wait_until(unlocked, what="the old process's lock to end with it", worker=worker, timeout=60)
    wait_until(lambda: "recycling: ran 1 jobs" in worker.output, what="the recycle's line",
               worker=worker)  # printed before the exec; read from the pipe a moment later
    assert worker.is_running(), worker.output


def test_a_timed_out_job_is_failed_and_retried(start_worker):
    job = sleep_for.using(timeout=0.5, max_attempts=2, retry_backoff=0.1,
                          retry_min_delay=0.1).enqueue(3)
    worker = start_worker("--burst", "-c", "2", settings={**FAST, "LEASE_SECONDS": 1.5})
    assert worker.wait(timeout=60) == 0, worker.output
    job.refresh_from_db()
    assert job.status == JobStatus.EXHAUSTED and job.attempts == 2
    assert [e["type"].rsplit(".", 1)[-1] for e in job.errors] == ["JobTimeout", "JobTimeout"]
    assert "ran longer than its timeout of 0.5s" in job.errors[0]["message"]


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_processes_run_under_a_supervisor_that_restarts_a_killed_child(start_worker,
                                                                       start_method):
    worker = start_worker("-p", "2", "--start-method", start_method, settings=FAST)
    rows = wait_until(lambda: list(Worker.objects.all()) if Worker.objects.count() == 2 else None,
                      what="two children", worker=worker)
    victim = rows[0].pid
    import os

    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: Worker.objects.count() == 2
               and not Worker.objects.filter(pid=victim).exists(),
               what="a replacement child", worker=worker)
    jobs = Job.objects.bulk_enqueue(record.prepare() for _ in range(20))
    wait_until(lambda: Job.objects.filter(status=JobStatus.SUCCEEDED).count() == len(jobs),
               what="jobs done", worker=worker)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output
    assert f"(--start-method {start_method})" in worker.output


def test_a_supervisor_running_other_threads_starts_fresh_interpreters(start_worker):
    # A fork would copy the thread's locks but not the thread: the children could hang.
    worker = start_worker("-p", "2", settings=FAST, env={"SQLQUEUE_TEST_START_A_THREAD": "1"})
    wait_until(lambda: Worker.objects.count() == 2, what="two children", worker=worker)
    assert "cannot fork safely: threads are running in this process (settings-thread)" in (
        worker.output
    )
    jobs = Job.objects.bulk_enqueue(record.prepare() for _ in range(5))
    wait_until(lambda: Job.objects.filter(status=JobStatus.SUCCEEDED).count() == len(jobs),
               what="jobs done", worker=worker)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output
    assert "(--start-method spawn)" in worker.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--concurrency", "0"], "--concurrency must be from 1 to 256, not 0."),
        (["--concurrency", "100000"], "--concurrency must be from 1 to 256, not 100000; for "
                                      "more jobs at once, run more processes (--processes)"),
        (["--processes", "100000"], "--processes must be from 1 to 256, not 100000."),
        (["--queue", "bad queue"], "invalid queue name 'bad queue': use 1 to 100 characters "
                                   "from letters, digits, '_', '.' and '-', starting with a "
                                   "letter or digit.\n"),
        (["--poll-interval", "-1"], "--poll-interval must be more than 0, not -1.0."),
        (["--max-jobs", "0"], "--max-jobs must be at least 1, not 0."),
        (["--async-concurrency", "-1"], "--async-concurrency must be from 0 (async jobs on the "
                                        "threads) to 10000, not -1."),
    ],
)
def test_bad_options_get_a_clear_error(start_worker, args, message):
    worker = start_worker(*args)
    assert worker.wait() != 0
    assert message in worker.output
    assert "Traceback" not in worker.output and ".." not in worker.output


def test_a_queue_no_task_uses_gets_a_warning_and_is_served_anyway(start_worker):
    worker = start_worker("--burst", "-q", "emials", "-q", "emails", "-q", "nope", settings=FAST)
    assert worker.wait() == 0, worker.output
    assert ("warning: no registered task uses queue 'emials' (did you mean 'emails'?) and no "
            "job waits in it (their queues: default, emails); this worker serves it anyway, for "
            "jobs enqueued with queue='emials'.") in worker.output
    assert "warning: no registered task uses queue 'nope' and no job waits" in worker.output
    assert "queue 'emails'" not in worker.output  # send_email's queue


def test_a_queue_that_jobs_or_a_queue_row_name_is_served_without_a_warning(start_worker):
    job = add.using(queue="nope").enqueue(1, 2)
    pause("paused-one")
    worker = start_worker("--burst", "-q", "nope", "-q", "paused-one", settings=FAST)
    assert worker.wait() == 0, worker.output
    assert "warning" not in worker.output
    assert job_status(job.pk) == JobStatus.SUCCEEDED


def test_max_memory_recycles_the_process_without_losing_jobs(start_worker):
    jobs = Job.objects.bulk_enqueue(record.prepare(tag=str(n)) for n in range(3))
    worker = start_worker("--burst", "--max-memory", "1", settings=FAST)  # 1 MB: always over
    assert worker.wait() == 0, worker.output
    assert "(--max-memory)" in worker.output
    assert Execution.objects.count() == len(jobs)
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}


def test_a_second_signal_exits_at_once_and_the_lease_rescues_the_job(start_worker):
    job = sleep_for.enqueue(30, tag="finished")
    worker = start_worker("--shutdown-timeout", "60", settings=FAST)
    wait_started(job.pk, worker)
    worker.signal(signal.SIGTERM)
    wait_until(lambda: "stopping" in worker.output, what="the first signal", worker=worker)
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=10) == 1
    assert job_status(job.pk) == JobStatus.RUNNING  # not released: the lease will bring it back


def test_with_processes_a_timed_out_job_gets_its_child_replaced(start_worker):
    job = sleep_for.using(timeout=0.5, max_attempts=1).enqueue(60)
    worker = start_worker("-p", "2", settings={**FAST, "LEASE_SECONDS": 1.5})
    wait_until(lambda: job_status(job.pk) == JobStatus.EXHAUSTED, what="the timeout",
               worker=worker)
    wait_until(lambda: "recycling: job" in worker.output
               and worker.output.count("started, pid") >= 3,
               what="a replacement child", worker=worker)
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, worker.output


def test_ctrl_c_to_the_whole_process_group_stops_supervised_children_gracefully(start_worker):
    import os

    worker = start_worker("-p", "2", settings=FAST)
    wait_until(lambda: Worker.objects.count() == 2, what="two children", worker=worker)
    job = sleep_for.enqueue(1.5, tag="finished")
    wait_started(job.pk, worker)
    os.killpg(worker.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    assert worker.wait(timeout=30) == 0, worker.output
    assert job_status(job.pk) == JobStatus.SUCCEEDED, worker.output
    assert "second signal" not in worker.output


def test_mixed_short_and_long_jobs_each_run_once(start_worker):
    # Short jobs are claimed ahead of the threads; while long ones hold every thread, those that
    # waited too long are released, and the next claim may take them again at once. Each job
    # still runs once, by its newest claim: no lost outcome, no job left to its lease.
    shorts = Job.objects.bulk_enqueue(record.prepare(tag=str(n)) for n in range(110))
    longs = [sleep_for.enqueue(1.5, tag="long") for _ in range(4)]
    shorts += Job.objects.bulk_enqueue(record.prepare(tag=str(n)) for n in range(40))
    worker = start_worker("--burst", "--processes", "2", "-c", "2", "--max-jobs", "40",
                          settings=FAST)
    assert worker.wait(timeout=180) == 0, worker.output
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}, (
        worker.output)
    assert not Job.objects.exclude(errors=[]).exists()  # no WorkerLost, no timeout
    runs = sorted(Execution.objects.exclude(tag="started").values_list("job_id", flat=True))
    assert runs == sorted(job.pk for job in [*shorts, *longs]), worker.output
    for line in ("outcome=lost", "job thread failed", "KeyError"):
        assert line not in worker.output
