"""Transactional jobs (docs/transactional-jobs.md): the option checked at enqueue, the worker's
lane (one transaction: lock, run in savepoints, one write, commit) and the ordinary claim's path
(function and fenced outcome in one transaction), on a real database. Worker processes racing
and killed: tests/chaos/test_transactional_kills.py."""

import threading

import pytest
from django.db import DatabaseError, connection, connections, transaction

from django_sqlqueue import current_job, job
from django_sqlqueue.db import ops
from django_sqlqueue.exceptions import InvalidTransactional
from django_sqlqueue.models import Job
from django_sqlqueue.run import transactional
from django_sqlqueue.run.outcomes import transition, write
from django_sqlqueue.run.runner import OutcomeKind
from django_sqlqueue.schedules.operations import run_now
from django_sqlqueue.schedules.runtime import add_schedule
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.transactional_lane import TransactionalLane
from django_sqlqueue.workflows import chain
from tests.support.waiting import wait_until
from tests.testapp.jobs import (
    insert_and_sleep,
    insert_once,
    insert_then_lose_connection,
    insert_then_wait,
    runs,
    work,
)
from tests.testapp.models import Execution
from tests.testapp.tasks import async_add

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


def lane(batch=10, **kwargs):
    return TransactionalLane(alias="default", worker_id="lane-test", batch=batch, **kwargs)


def rows(pk=None):
    executions = Execution.objects.all() if pk is None else Execution.objects.filter(job_id=pk)
    return executions.count()


# ---- the option, at the boundary ------------------------------------------------------------
def test_a_transactional_job_gets_the_settings_time_limit_and_its_flag(settings):
    settings.SQLQUEUE = {**settings.SQLQUEUE, "TRANSACTIONAL_TIMEOUT_SECONDS": 12}
    queued = insert_once.enqueue("a")
    assert (queued.transactional, queued.timeout_seconds) == (True, 12.0)
    plain = work.enqueue()
    assert (plain.transactional, plain.timeout_seconds) == (False, None)
    shorter = work.using(transactional=True, timeout=3).enqueue()
    assert (shorter.transactional, shorter.timeout_seconds) == (True, 3.0)


def test_a_time_limit_longer_than_the_setting_is_refused_naming_the_fix():
    with pytest.raises(InvalidTransactional, match="make it a normal job"):
        work.using(transactional=True, timeout=3600).enqueue()
    with pytest.raises(InvalidTransactional, match="True or False"):
        work.using(transactional="yes").enqueue()
    assert not Job.objects.exists()


def test_an_async_function_cannot_be_transactional():
    with pytest.raises(InvalidTransactional, match="async function"):
        async_add.using(transactional=True).enqueue(1, 2)
    with pytest.raises(InvalidTransactional, match="async function"):
        job(name="tests.async_transactional", transactional=True)(async_add.func)
    assert not Job.objects.exists()


# ---- the lane -------------------------------------------------------------------------------
def test_the_lane_runs_transactional_jobs_and_records_them_in_one_transaction():
    jobs = [insert_once.enqueue(str(n)) for n in range(5)]
    plain = work.enqueue()
    result = lane().run_once()
    assert (result.locked, result.ran, result.succeeded) == (5, 5, 5)
    for queued in jobs:
        queued.refresh_from_db()
        assert (queued.status, queued.attempts, queued.claimed_by) == (
            JobStatus.SUCCEEDED, 1, "lane-test")
        assert queued.finished_at is not None
        assert rows(queued.pk) == 1
    plain.refresh_from_db()
    assert plain.status == JobStatus.QUEUED  # not the lane's
    assert [run.outcome for run in result.results] == ["succeeded"] * 5
    assert lane().run_once().locked == 0


def test_a_failure_rolls_back_its_effects_and_is_retried_by_its_policy(settings):
    settings.SQLQUEUE = {**settings.SQLQUEUE, "BACKOFF_SECONDS": 0, "MIN_RETRY_DELAY_SECONDS": 0,
                         "RETRY_JITTER": 0}
    failing = insert_once.enqueue("f", fail_first=1)
    fine = insert_once.enqueue("ok")
    result = lane().run_once()
    assert (result.ran, result.succeeded) == (2, 1)
    failing.refresh_from_db()
    assert (failing.status, failing.attempts, len(failing.errors)) == (JobStatus.FAILED, 1, 1)
    assert "planned failure of attempt 1" in failing.errors[0]["message"]
    assert rows(failing.pk) == 0  # its row went with the savepoint
    assert rows(fine.pk) == 1  # the other job's effects were kept
    assert lane().run_once().succeeded == 1
    failing.refresh_from_db()
    assert (failing.status, failing.attempts) == (JobStatus.SUCCEEDED, 2)
    assert list(Execution.objects.filter(job_id=failing.pk).values_list("attempt", flat=True)) \
        == [2]


@job(name="tests.transactional_cancels_itself", transactional=True)
def cancels_itself():
    """Cancels its own job as it runs (a lane's row is still queued then: cancelled at once)."""
    Job.objects.filter(pk=current_job().pk).cancel(by="itself")


def test_the_lanes_outcome_write_is_fenced_a_job_that_cancelled_itself_stays_cancelled():
    """The lane writes its outcomes by the fenced outcome write of every claimed job: a row that
    left the ready statuses while its job ran is not written over (the lane's own UPDATE of the
    successes did, and the job ended succeeded)."""
    cancelled, fine = cancels_itself.enqueue(), insert_once.enqueue("ok")
    result = lane().run_once()
    assert (result.ran, result.succeeded) == (2, 2)
    cancelled.refresh_from_db(), fine.refresh_from_db()
    assert (cancelled.status, cancelled.cancelled_by) == (JobStatus.CANCELLED, "itself")
    assert (fine.status, fine.attempts, fine.claimed_by) == (JobStatus.SUCCEEDED, 1, "lane-test")
    assert {run.job.pk: run.outcome for run in result.results} == {
        cancelled.pk: "lost", fine.pk: "succeeded"}


def test_the_lane_skips_rows_another_transaction_holds():
    held, free = insert_once.enqueue("held"), insert_once.enqueue("free")
    locked, release = threading.Event(), threading.Event()

    def hold():
        with transaction.atomic():
            list(Job.objects.filter(pk=held.pk).select_for_update())
            locked.set()
            release.wait(60)
        connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(60)
        result = lane().run_once()
    finally:
        release.set()
        holder.join()
    # SQLite has one writer: the lane waited for the holder's transaction (its write lock), and
    # then ran both. Where rows lock one by one, it skipped the held row.
    ran = {run.job.pk for run in result.results}
    assert free.pk in ran
    held.refresh_from_db()
    assert held.status == (JobStatus.SUCCEEDED if held.pk in ran else JobStatus.QUEUED)


def test_a_workflows_transactional_parent_releases_its_child_in_the_same_transaction():
    flow = chain(insert_once.s("parent"), work.s()).enqueue()  # work(key=parent's result)
    parent, child = flow.jobs
    assert lane().run_once().succeeded == 1
    parent.refresh_from_db(), child.refresh_from_db()
    assert (parent.status, child.status) == (JobStatus.SUCCEEDED, JobStatus.QUEUED)


def test_a_job_that_hangs_past_its_limit_is_cut_off_by_the_database_and_charged():
    if not ops(connection).bound_transaction(seconds=1):
        pytest.skip("this database cannot end a transaction from its side (SQLite: one "
                    "writer, held until the job returns: docs/transactional-jobs.md)")
    hung = insert_and_sleep.enqueue(4)  # its limit is 1 s: idle in its transaction for 4 s
    with pytest.raises(DatabaseError):
        lane().run_once()
    connections.close_all()
    hung.refresh_from_db()
    assert (hung.status, hung.attempts, hung.interruptions) == (JobStatus.QUEUED, 0, 1)
    assert "ended the transactional lane's transaction" in hung.errors[-1]["message"]
    assert rows(hung.pk) == 0  # its row was rolled back with the transaction


# ---- the ordinary claim's path --------------------------------------------------------------
def test_a_transactional_job_claimed_as_any_job_commits_its_effects_with_its_outcome():
    queued = insert_once.enqueue("claimed")
    claimed, = Job.objects.claim(None, "w", limit=1)
    outcome, written = transactional.run_claimed(claimed, "default")
    assert (outcome.kind, written) == (OutcomeKind.SUCCEEDED, True)
    queued.refresh_from_db()
    assert queued.status == JobStatus.SUCCEEDED
    assert rows(queued.pk) == 1


def test_a_lost_claim_rolls_back_the_effects_with_the_outcome():
    queued = insert_once.enqueue("lost")
    claimed, = Job.objects.claim(None, "w", limit=1)
    # Its lease ran out and the job was given back meanwhile (the rescuer's write).
    Job.objects.filter(pk=queued.pk).update(status=JobStatus.QUEUED, claim_token=None)
    outcome, written = transactional.run_claimed(claimed, "default")
    assert (outcome.kind, written) == (OutcomeKind.SUCCEEDED, False)
    assert rows(queued.pk) == 0
    queued.refresh_from_db()
    assert queued.status == JobStatus.QUEUED


def test_a_failure_on_the_ordinary_path_is_left_to_the_outcome_writer_without_its_effects():
    insert_once.enqueue("f", fail_first=1)
    claimed, = Job.objects.claim(None, "w", limit=1)
    outcome, written = transactional.run_claimed(claimed, "default")
    assert (outcome.kind, written) == (OutcomeKind.FAILED, None)
    assert rows() == 0


@pytest.mark.server_database
def test_the_database_going_away_before_the_outcome_is_written_interrupts_the_run():
    """A restart after the job returned: its outcome's write finds the connection gone. The
    run is interrupted (its effects went with the transaction), not a failure of the job, and
    not an exception that leaves the job to its lease."""
    queued = insert_then_lose_connection.enqueue()
    claimed, = Job.objects.claim(None, "w", limit=1)
    outcome, written = transactional.run_claimed(claimed, "default")
    assert (outcome.kind, written) == (OutcomeKind.INTERRUPTED, None)
    connections.close_all()
    assert rows(queued.pk) == 0
    # What the outcome writer does with it once the database answers.
    assert write([(claimed, transition(claimed, outcome))], "default") == {queued.pk}
    allowed = queued.max_attempts
    queued.refresh_from_db()
    assert (queued.status, queued.interruptions) == (JobStatus.QUEUED, 1)
    assert (queued.attempts, queued.max_attempts) == (1, allowed + 1)  # the attempt given back
    assert "the database went away" in queued.errors[-1]["message"]


@pytest.mark.server_database
def test_a_restart_before_the_outcome_is_written_is_an_outage_not_counted(
        database_server, tmp_path, monkeypatch):
    """The server restarts while the job's transaction is open, after its write: the outcome's
    write finds the connection gone. An outage, as for a job's own error: recorded, not counted
    towards max_interruptions (before, it was counted: a restart under transactional jobs used
    up their interruptions, tests/tasks_backend/test_kills.py)."""
    if database_server is None:
        pytest.skip("needs the suite's own server, to restart it")
    log, flag = tmp_path / "runs.txt", tmp_path / "restarted"
    monkeypatch.setenv("SQLQUEUE_TEST_RUNS_FILE", str(log))
    queued = insert_then_wait.using(max_interruptions=1).enqueue(str(flag))
    claimed, = Job.objects.claim(None, "w", limit=1)
    ran = []

    def run():
        try:
            ran.append(transactional.run_claimed(claimed, "default"))
        finally:
            connections.close_all()

    runner = threading.Thread(target=run)
    runner.start()
    wait_until(lambda: runs(log), what="the job's write, its transaction open")
    database_server.restart()
    flag.touch()
    runner.join(timeout=240)
    (outcome, written), = ran
    assert (outcome.kind, outcome.counted, written) == (OutcomeKind.INTERRUPTED, False, None)
    connections.close_all()
    assert write([(claimed, transition(claimed, outcome))], "default") == {queued.pk}
    queued.refresh_from_db()
    assert (queued.status, queued.interruptions) == (JobStatus.QUEUED, 0), queued.errors
    assert "an outage, not counted towards max_interruptions" in queued.errors[-1]["message"]
    assert rows(queued.pk) == 0  # its row went with the transaction


# ---- schedules ------------------------------------------------------------------------------
def test_a_schedule_of_a_transactional_task_enqueues_transactional_jobs():
    row = add_schedule("points", insert_once, every=60, kwargs={"key": "tick"})
    assert row.job_options["transactional"] is True
    plain = add_schedule("plain", work, every=60)
    assert "transactional" not in plain.job_options  # rows of other schedules unchanged
    run_now(row, by="test")
    ticked = Job.objects.get(task_name="chaos.insert_once")
    assert (ticked.transactional, ticked.timeout_seconds) == (True, 30.0)
