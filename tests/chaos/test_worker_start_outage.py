"""A worker started while its database is down waits for it, and then works: as after a crash
that took both down, or a deploy during a database restart. On MariaDB, Django's system checks,
which run before the worker's own code, connect to the database; a worker started then exited
with a traceback (found by the chaos tests, whose replacements of killed workers started during
a restart)."""

import pytest
from django.db import connections

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.support.waiting import wait_until
from tests.testapp.tasks import add

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


def test_a_worker_started_while_the_database_is_down_waits_for_it(start_worker,
                                                                  database_server):
    if database_server is None:
        pytest.skip("needs the suite's own server (SQLite has none to stop)")
    if getattr(database_server, "pgbouncer", None) is not None:
        pytest.skip("behind PgBouncer a connection waits in the pooler's queue for the server "
                    "(and then for its login retry), not refused: the direct passes test this")
    job = add.enqueue(2, 3)
    connections.close_all()
    database_server.stop()
    try:
        worker = start_worker(settings={"POLL_INTERVAL_SECONDS": 0.2})
        wait_until(lambda: "database unavailable while" in worker.output
                   or not worker.is_running(),
                   what="the worker to say that it waits for the database", worker=worker)
        assert worker.is_running(), worker.output
    finally:
        database_server.start()
    wait_until(lambda: Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED,
               what="the worker to run the job once the database is back", worker=worker)
    assert "Traceback" not in worker.output, worker.output
