"""The other side of tests/process/test_outage_interruptions.py: a job whose own connection the
server ends while it keeps answering is interrupted, and that counts towards max_interruptions
(a job that breaks its connections could otherwise run for ever); a server restarted during the
run is an outage, not counted, even when it answers again by the time the worker looks."""

import threading
import time

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections

from django_sqlqueue.db import ops, outages
from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.statuses import JobStatus
from tests.support.server_side import sleeping_on_server
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import lose_own_connection, outlast_a_restart

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_job_whose_own_connection_died_while_the_server_answered_is_counted():
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no server to end a connection")
    job = lose_own_connection.using(max_interruptions=2).enqueue()
    (claimed,) = Job.objects.claim(worker_id="w", limit=1)
    assert run_job(claimed).outcome == "interrupted"  # runs again, the attempt given back
    job.refresh_from_db()
    assert (job.status, job.interruptions) == (JobStatus.QUEUED, 1)
    assert "interruption 1 of 2" in job.errors[-1]["message"]
    (claimed,) = Job.objects.claim(worker_id="w", limit=1)
    run_job(claimed)
    job.refresh_from_db()
    assert (job.status, job.interruptions) == (JobStatus.EXHAUSTED, 2)


def test_a_restart_the_job_outlasted_is_an_outage_not_counted(database_server):
    """The server restarts under the job's statement, and the job raises that error only once
    the server answers again (an error handler that takes its time; through PgBouncer, whose
    queue holds the worker's check until the server is back, it need not even wait): the
    worker's check finds the database reachable, and the server's start time says it restarted
    during the run."""
    if database_server is None:
        pytest.skip("needs the suite's own server, to restart it")
    job = outlast_a_restart.using(max_interruptions=1).enqueue()
    (claimed,) = Job.objects.claim(worker_id="w", limit=1)
    outcomes = []

    def run():
        try:
            outcomes.append(run_job(claimed).outcome)
        finally:
            connections.close_all()

    runner = threading.Thread(target=run)
    runner.start()
    wait_until(lambda: Execution.objects.filter(job_id=job.pk, tag="started").exists()
               and sleeping_on_server(), what="the run's statement to be in flight")
    database_server.restart()
    runner.join(timeout=240)
    assert outcomes == ["interrupted"]
    job = wait_until(lambda: Job.objects.get(pk=job.pk), what="the job's row after the restart")
    assert (job.status, job.interruptions) == (JobStatus.QUEUED, 0), job.errors
    assert "an outage, not counted towards max_interruptions" in job.errors[-1]["message"]


def test_a_restart_after_the_run_began_is_seen_however_late_the_worker_looks(database_server):
    """The worker's check may reach the server long after the error: through PgBouncer, its
    query waits in the pooler's queue until the server is back and has been up a while. A run
    that began just before the restart is still seen to have outlasted it (CI once counted such
    an outage: the run's length was read when the error was caught, shorter than the new
    server's uptime by the time the check was answered)."""
    if database_server is None:
        pytest.skip("needs the suite's own server, to restart it")
    began = time.monotonic()
    database_server.restart()
    connections.close_all()
    run_until_restarted = time.monotonic() - began

    def uptime():
        with connection.cursor() as cursor:
            return ops(connection).server_uptime(cursor)

    # By construction: the new server has now been up longer than the run had lasted when the
    # server went away.
    wait_until(lambda: uptime() > run_until_restarted, what="the server's uptime to grow")
    assert not outages.server_stayed_up(DEFAULT_DB_ALIAS, began)
