"""After an outage this process observed, maintenance rescues nothing and reaps no silent worker
for one lease (worker/maintenance/outage_grace.py), on every database, driven by an injected
clock; a connection error while the database answers starts no grace; a server restart it did
not observe holds the same until the server has been up for a lease. The outage itself, with a
real server stopped, is tests/process/test_outage_interruptions.py."""

import datetime as dt

import pytest
from django.db import OperationalError, connections
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker.maintenance.service import Maintenance
from tests.support.waiting import wait_until
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db
LEASE = 30


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def maintenance(clock, *, reachable):
    # A server up long before: the grace under test is the observed outage's, not a restart's
    # (the real uptime holds too while the suite's own server is a second or two old).
    made = Maintenance(alias="default", lease_seconds=LEASE, keep_succeeded=None,
                       keep_failed=None, worker_id="grace", clock=clock,
                       server_uptime=lambda alias: 86400.0)
    made.grace.reachable = lambda alias: reachable  # what a new connection would find
    return made


def expired_job():
    job = add.enqueue(1, 2)
    Job.objects.claim(worker_id="gone", limit=1, lease=1)
    return job, timezone.now() + dt.timedelta(minutes=5)  # past its lease


def test_after_an_outage_expired_leases_wait_one_lease_before_their_rescue():
    clock = Clock()
    steps = maintenance(clock, reachable=False)
    job, later = expired_job()
    steps.grace.failed(OperationalError("server closed the connection unexpectedly"))
    assert steps.run_once(now=later).rescued == 0  # back: the live workers renew meanwhile
    clock.now += LEASE - 1
    assert steps.run_once(now=later).rescued == 0
    clock.now += 1
    assert steps.run_once(now=later).rescued == 1  # gone for good: rescued, counted
    job.refresh_from_db()
    assert (job.status, job.interruptions) == (JobStatus.QUEUED, 1)


def test_a_connection_error_while_the_database_answers_starts_no_grace():
    steps = maintenance(Clock(), reachable=True)
    _, later = expired_job()
    steps.grace.failed(OperationalError("terminating connection due to administrator command"))
    assert steps.run_once(now=later).rescued == 1


@pytest.mark.django_db(transaction=True)  # the restart ends the connection: no test transaction
def test_a_restart_it_did_not_see_holds_rescues_until_the_server_has_been_up_a_lease(
        database_server):
    """As through PgBouncer, whose queue holds maintenance's statements while the server is
    down, so that no pass fails: the restart is found by the server's uptime."""
    if database_server is None:
        pytest.skip("needs the suite's own server, to restart it")
    steps = Maintenance(alias="default", lease_seconds=LEASE, keep_succeeded=None,
                        keep_failed=None, worker_id="grace")
    job, later = expired_job()
    database_server.restart()
    connections.close_all()
    wait_until(lambda: Job.objects.filter(pk=job.pk).exists(), what="the server to answer")
    # By construction: the server started after this process's maintenance did.
    assert steps.run_once(now=later).rescued == 0
    steps.grace.uptime = lambda alias: LEASE  # the server has now been up for a lease
    assert steps.run_once(now=later).rescued == 1
