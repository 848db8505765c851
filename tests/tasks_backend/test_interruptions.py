"""An interruption is not a failure: with the django.tasks backend at its defaults (OPTIONS {},
so one attempt per task), a database restart or a killed worker never fails a task. The run is
given back without using the attempt and recorded in the job's errors; a task that kills its
worker every time ends after its max_interruptions, and the fleet keeps serving the others."""

import signal
from collections import Counter

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.db import connections  # noqa: E402
from django.tasks import TaskResultStatus, task_backends  # noqa: E402

from django_sqlqueue.models import Job  # noqa: E402
from django_sqlqueue.statuses import FINISHED_STATUSES, JobStatus  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402
from tests.testapp import django_tasks as tasks  # noqa: E402
from tests.testapp.models import Run  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)
# The queue's own timings made short; nothing about attempts: the backend's defaults hold.
FAST = {"POLL_INTERVAL_SECONDS": 0.3, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "LEASE_SECONDS": 5}


def _unfinished() -> int:
    return Job.objects.exclude(status__in=FINISHED_STATUSES).count()


def _interrupted_entries(job) -> list:
    return [entry for entry in job.errors if entry.get("interrupted")]


def _thousand_tasks() -> list:
    results = [tasks.record_run.enqueue(str(n), sleep_seconds=0.02) for n in range(1000)]
    assert Job.objects.get(pk=int(results[0].id)).max_attempts == 1  # the backend's default
    return results


def _at_shares_of_the_run(results, worker, chaos):
    """``chaos()`` once 25% and once 60% of the tasks are done."""
    for share in (0.25, 0.6):
        wait_until(lambda s=share: Job.objects.filter(status=JobStatus.SUCCEEDED).count()
                   >= s * len(results), timeout=180, what=f"{share:.0%} of the tasks done",
                   worker=worker)
        chaos()
        connections.close_all()


def _every_task_succeeded_once(results, worker) -> list:
    """Every task SUCCESSFUL; each wrote its row, and a second one only where a run was cut
    after its write. Returns the interruption entries."""
    wait_until(lambda: _unfinished() == 0, timeout=300, interval=0.5, what="every task to end",
               worker=worker)
    jobs = list(Job.objects.filter(pk__in=[int(r.id) for r in results]))
    statuses = Counter(task_backends["default"].get_result(str(job.pk)).status for job in jobs)
    failed = [(job.pk, job.errors[-1]["message"]) for job in jobs
              if job.status != JobStatus.SUCCEEDED][:5]
    assert statuses == {TaskResultStatus.SUCCESSFUL: len(results)}, (statuses, failed)
    rows = Counter(Run.objects.values_list("job_id", flat=True))
    entries = []
    for job in jobs:
        cuts = _interrupted_entries(job)
        entries += cuts
        assert 1 <= rows[job.pk] <= 1 + len(cuts), (job.pk, rows[job.pk], job.errors)
        assert job.attempts == job.max_attempts  # every cut attempt was given back
    return entries


@pytest.mark.server_database
@pytest.mark.timeout(900)  # restarts the server, as the chaos scenarios do
def test_database_restarts_fail_no_task_at_the_defaults(start_worker, database_server):
    if database_server is None:
        pytest.skip("needs the suite's own server (DATABASE_URL names an outside one)")
    results = _thousand_tasks()
    # Leases far longer than a restart: no held job's lease runs out while its worker waits for
    # the database (that would be a rescue, an interruption too, but not what this counts).
    workers = [start_worker("-c", "4", settings={**FAST, "LEASE_SECONDS": 60})
               for _ in range(3)]
    _at_shares_of_the_run(results, workers[0], lambda: database_server.restart(mode="fast"))
    entries = _every_task_succeeded_once(results, workers[0])
    assert entries, "no restart cut a run in flight: nothing was tested"
    # A worker starts no held job while its database is away: a restart cuts the runs in
    # flight, one per thread, and at most one more each where a server that is shutting down
    # still accepted the worker's check (MariaDB: 25 of 24 once) - not every job claimed ahead
    # too, 8 per thread (without the wait, 179 runs were cut).
    causes = Counter(entry["type"] for entry in entries)
    assert len(entries) <= 2 * 2 * 3 * 4, (
        f"{len(entries)} runs cut by 2 restarts of 12 threads: {causes}")
    assert all(w.is_running() for w in workers), [w.output[-2000:] for w in workers]
    for worker in workers:
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output[-3000:]


@pytest.mark.timeout(900)
def test_killed_workers_fail_no_task_at_the_defaults(start_worker):
    """The same on every database, SQLite included: twice, a worker is SIGKILLed mid-run and
    another started in its place."""
    results = _thousand_tasks()
    workers = [start_worker("-c", "4", settings=FAST) for _ in range(3)]

    def kill_one():
        victim = workers.pop(0)
        victim.signal(signal.SIGKILL)
        victim.wait()
        workers.append(start_worker("-c", "4", settings=FAST))

    _at_shares_of_the_run(results, workers[-1], kill_one)
    entries = _every_task_succeeded_once(results, workers[-1])
    assert entries, "no kill cut a run in flight: nothing was tested"
    assert {entry["type"] for entry in entries} == {"django_sqlqueue.run.outcomes.WorkerLost"}
    for worker in workers:
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output[-3000:]


def test_a_task_whose_worker_is_killed_runs_again_and_succeeds(start_worker):
    result = tasks.sleeps_on_its_first_attempt.enqueue(600)
    first = start_worker("-c", "1", settings=FAST)
    wait_until(lambda: Run.objects.filter(job_id=int(result.id)).exists(), what="the first run",
               worker=first)
    first.signal(signal.SIGKILL)
    first.wait()
    second = start_worker("-c", "1", settings=FAST)
    wait_until(lambda: Job.objects.get(pk=int(result.id)).status in FINISHED_STATUSES,
               timeout=120, what="the task to end", worker=second)
    result.refresh()
    job = Job.objects.get(pk=int(result.id))
    assert result.status == TaskResultStatus.SUCCESSFUL, job.errors
    assert result.errors == []  # the loss of a worker is no error of the task's
    assert (job.attempts, job.max_attempts, job.interruptions) == (2, 2, 1)
    (entry,) = _interrupted_entries(job)
    assert entry["type"] == "django_sqlqueue.run.outcomes.WorkerLost"
    assert entry["worker"].startswith("w0:") and "interruption 1 of 3" in entry["message"]
    assert Run.objects.filter(job_id=job.pk).count() == 2
    second.signal(signal.SIGTERM)
    assert second.wait() == 0


def test_a_task_that_kills_every_worker_ends_after_its_max_interruptions(start_worker):
    poison = tasks.kills_its_worker.enqueue()
    others = [tasks.add.enqueue(n, n) for n in range(20)]
    fleet = start_worker("--processes", "2", "-c", "1", settings=FAST)
    wait_until(lambda: Job.objects.get(pk=int(poison.id)).status in FINISHED_STATUSES,
               timeout=180, what="the poison pill to end", worker=fleet)
    wait_until(lambda: _unfinished() == 0, timeout=120, what="the other tasks", worker=fleet)
    poison.refresh()
    job = Job.objects.get(pk=int(poison.id))
    assert poison.status == TaskResultStatus.FAILED
    assert (job.status, job.interruptions) == (JobStatus.EXHAUSTED, 3)
    assert Run.objects.filter(job_id=job.pk).count() == 3  # run three times, never again
    assert [e["message"].endswith("not run again (max_interruptions), as the job may be what "
                                  "stops its workers.") for e in _interrupted_entries(job)] == [
        False, False, True]
    assert [e.exception_class_path for e in poison.errors] == [
        "django_sqlqueue.run.outcomes.WorkerLost"]  # why it ended, as Django users read it
    for result in others:
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
    assert fleet.is_running(), fleet.output[-3000:]
    fleet.signal(signal.SIGTERM)
    assert fleet.wait(timeout=120) == 0, fleet.output[-3000:]
