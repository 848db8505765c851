"""A worker's writes that time out waiting for a row lock held elsewhere are retried until they
land: the outcome is not lost, the job does not run again.

Someone's ``SELECT ... FOR UPDATE`` on a job row (an admin action, a script, a report that
locks) can outlast the server's lock wait timeout: MariaDB's ``innodb_lock_wait_timeout``
(50 s by default, error 1205), PostgreSQL's ``lock_timeout`` when a site sets one. The worker
sees an ``OperationalError`` and must treat it like a dropped connection (worker/resilience.py).
"""

import time

import pytest
from django.db import connection, transaction

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.conftest import MARIADB, VENDOR
from tests.support.waiting import wait_started, wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import sleep_for

pytestmark = [pytest.mark.server_database, pytest.mark.django_db(transaction=True)]
LOCK_WAIT_SECONDS = 1


@pytest.fixture
def short_lock_waits():
    """Lock waits of LOCK_WAIT_SECONDS for the connections opened from now on (the worker's)."""
    if VENDOR == "pgbouncer":
        pytest.skip("the pooler's server connections were opened before the setting")
    with connection.cursor() as cursor:
        if MARIADB:
            cursor.execute("SELECT @@GLOBAL.innodb_lock_wait_timeout")
            (before,) = cursor.fetchone()
            cursor.execute(f"SET GLOBAL innodb_lock_wait_timeout = {LOCK_WAIT_SECONDS}")
        else:
            cursor.execute(
                f"ALTER DATABASE {connection.ops.quote_name(connection.settings_dict['NAME'])} "
                f"SET lock_timeout = '{LOCK_WAIT_SECONDS}s'")
    yield
    with connection.cursor() as cursor:
        if MARIADB:
            cursor.execute(f"SET GLOBAL innodb_lock_wait_timeout = {int(before)}")
        else:
            cursor.execute(
                f"ALTER DATABASE {connection.ops.quote_name(connection.settings_dict['NAME'])} "
                "RESET lock_timeout")


def test_an_outcome_write_that_times_out_on_a_row_lock_is_retried_until_it_lands(
        short_lock_waits, start_worker):
    job = sleep_for.enqueue(1.0, tag="done")
    worker = start_worker("-c", "1", settings={"LEASE_SECONDS": 60, "POLL_INTERVAL_SECONDS": 0.2})
    wait_started(job.pk, worker)
    held = 4 * LOCK_WAIT_SECONDS
    with transaction.atomic():
        # The job's row, locked while the job finishes and its outcome write waits for it.
        Job.objects.select_for_update().get(pk=job.pk)
        time.sleep(held)
        assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
    wait_until(lambda: Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED,
               what="the outcome", worker=worker)
    job.refresh_from_db()
    assert job.attempts == 1
    assert Execution.objects.filter(job_id=job.pk, tag="done").count() == 1
    # The write did time out on the lock at least once, and was retried: the path under test.
    assert "database unavailable while recording the outcomes" in worker.output, worker.output
