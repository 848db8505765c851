"""Scenarios 2 and 3: the database goes away under a working fleet, by ``pg_ctl restart -m fast``
or by ``pg_terminate_backend`` of every worker connection (LISTEN connections included); in the
pgbouncer pass, PgBouncer restarts too; in the MariaDB pass, the server restarts (a clean
shutdown, and a SIGKILL) and ``KILL CONNECTION`` ends every worker connection. Every job
still ends succeeded, none is lost, no worker exits, and every job that ran twice did so because
the queue recorded its earlier attempt as interrupted by the outage (see ledger.py)."""

import datetime as dt
import random
import time

import pytest
from django.db import OperationalError, connection, connections
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import FINISHED_STATUSES, JobStatus
from tests.chaos.conftest import elapsed, sized, with_attempts
from tests.chaos.ledger import tally
from tests.support.fleet import Fleet, seed
from tests.support.waiting import wait_until
from tests.testapp.jobs import work

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

JOBS = sized(3_000, 50_000)
ROUNDS = sized(15, 500)  # of terminated connections
TOP_UP = 500  # jobs added whenever fewer are left, so that each round finds work going on
CONCURRENCIES = (1, 2, 4, 1, 2, 4)
# Jobs whose own writes fail while the database is away are retried after 0.2 s, 0.4 s, ...
SETTINGS = {
    "LEASE_SECONDS": 5, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.3,
    "BACKOFF_SECONDS": 0.2, "MIN_RETRY_DELAY_SECONDS": 0.2, "MAX_RETRY_DELAY_SECONDS": 10,
    "MAX_ATTEMPTS": 25,
}


def _succeeded():
    return Job.objects.filter(status=JobStatus.SUCCEEDED).count()


def _enqueue(count, max_interruptions=None):
    task = work if max_interruptions is None else work.using(max_interruptions=max_interruptions)
    return Job.objects.bulk_enqueue(task.prepare(key=str(n), max_sleep_ms=10)
                                    for n in range(count))


def _finish(fleet, jobs, started):
    # Every job finished, not only succeeded: one that ended otherwise is reported by the
    # ledger with its status and last error, instead of a wait that times out.
    fleet.wait_until(lambda: not Job.objects.exclude(status__in=FINISHED_STATUSES).exists(),
                     timeout=sized(180, 1800), interval=0.5, what="every job to finish")
    seconds = elapsed(started)
    assert fleet.running(), f"a worker exited: {fleet.dead()}"
    return seconds


def _restarts_under_load(start_worker, restart, reliability, scenario, max_attempts):
    settings = with_attempts(SETTINGS, max_attempts)
    jobs = _enqueue(JOBS)
    # A tenth of them held back (due in an hour) until after the last restart: so the last
    # restart falls in the run however fast the fleet drains the rest (it once drained the
    # 40% left after the last restart's trigger before pg_ctl's restart came back).
    held = [job.pk for job in jobs[-len(jobs) // 10:]]
    Job.objects.filter(pk__in=held).update(run_at=timezone.now() + dt.timedelta(hours=1))
    started = time.monotonic()
    fleet = Fleet(start_worker, CONCURRENCIES, settings=settings)
    restarts = sized(2, 10)
    for n in range(restarts):
        # Spread over the run: after 25% and 60% of the jobs in CI.
        target = len(jobs) * (0.25 + 0.35 * n) if restarts == 2 else len(jobs) * n / restarts
        target = min(target, len(jobs) - len(held))
        fleet.wait_until(lambda t=target: _succeeded() >= t,
                         what=f"progress before restart {n + 1}")
        restart()
        connections.close_all()
    assert Job.objects.filter(pk__in=held).run_now() == len(held)  # due now: the run goes on
    seconds = _finish(fleet, jobs, started)
    codes = fleet.stop()

    result = tally()
    reliability(scenario, max_attempts=max_attempts, workers=len(CONCURRENCIES),
                restarts=restarts,
                worker_exits=0, **result.figures(), seconds=seconds)
    result.assert_clean()
    assert codes == [0] * len(codes), fleet.output()[-5000:]
    assert "database unavailable" in fleet.output()


@pytest.mark.postgresql
def test_postgresql_restarts_lose_no_job_and_stop_no_worker(start_worker, pg_cluster,
                                                            reliability, max_attempts):
    if pg_cluster is None:
        pytest.skip("needs the suite's own cluster (DATABASE_URL names an outside server)")
    _restarts_under_load(start_worker, lambda: pg_cluster.restart(mode="fast"), reliability,
                         "restarts", max_attempts)


@pytest.mark.postgresql
def test_pgbouncer_restarts_lose_no_job_and_stop_no_worker(start_worker, pg_cluster,
                                                           reliability, max_attempts):
    """The pgbouncer pass: the pooler, not PostgreSQL, goes away under the fleet (SIGTERM drops
    every client and server connection at once) and comes back on the same port."""
    if pg_cluster is None or pg_cluster.pgbouncer is None:
        pytest.skip("runs in the pgbouncer pass (SQLQUEUE_TEST_DATABASE=pgbouncer)")
    _restarts_under_load(start_worker, pg_cluster.pgbouncer.restart, reliability,
                         "pgbouncer restarts", max_attempts)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_mariadb_restarts_lose_no_job_and_stop_no_worker(start_worker, mariadb_server,
                                                         reliability, mode, max_attempts):
    """The MariaDB pass: a clean shutdown (SIGTERM), or a crash (SIGKILL; InnoDB recovers
    at start), under the fleet, and the server back on the same port."""
    if mariadb_server is None:
        pytest.skip("runs in the MariaDB pass (SQLQUEUE_TEST_DATABASE=mariadb)")
    _restarts_under_load(start_worker, lambda: mariadb_server.restart(mode=mode), reliability,
                         f"mariadb restarts ({mode})", max_attempts)


def _terminate_worker_connections() -> int:
    """End every other connection to the test database, as an operator or a failover would."""
    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute("SELECT id FROM information_schema.processlist "
                           "WHERE db = DATABASE() AND id <> CONNECTION_ID()")
            ids = [row[0] for row in cursor.fetchall()]
            for connection_id in ids:
                try:
                    cursor.execute("KILL CONNECTION %s", [connection_id])
                except OperationalError:  # it had just closed: 1094, unknown thread
                    pass
            return len(ids)
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'"
        )
        return cursor.fetchone()[0]


def test_terminated_connections_lose_no_job_and_stop_no_worker(start_worker, reliability,
                                                               max_attempts):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no server connections to end")
    rng = random.Random(run_seed := seed())
    # Each round ends every connection, so a job can be cut short once a round: the bound on
    # interruptions (max_interruptions, 3 by default, there for a job that stops its workers)
    # is set above the rounds, which a job's runs reached in a CI run once the workers no
    # longer waited out a doubled backoff after each round (1 job of 3,000 ended exhausted).
    jobs = _enqueue(JOBS, max_interruptions=ROUNDS + 1)
    started = time.monotonic()
    settings = with_attempts(SETTINGS, max_attempts)
    fleet = Fleet(start_worker, CONCURRENCIES, settings=settings)
    # Each round comes once the fleet got a random 2-50% of a top-up done since the last one,
    # so the workers are connected and working when their connections end; a top-up before
    # each keeps work ahead of them. Every round is reached by construction, on any machine.
    # (Rounds every 0.3-1 s until the queue was empty gave a fast machine 6 rounds through
    # PgBouncer, whose fleet barely notices its server connections ending.) This process's own
    # statements go through wait_until, which retries them on a fresh connection: through
    # PgBouncer, its next transaction may be given a server connection the round just ended.
    terminated = done = 0
    for n in range(ROUNDS):
        if len(jobs) - done < TOP_UP:
            jobs += wait_until(lambda: _enqueue(TOP_UP, max_interruptions=ROUNDS + 1),
                               what="a top-up of the queue")
        target = done + round(rng.uniform(0.02, 0.5) * TOP_UP)
        done = fleet.wait_until(lambda t=target: (count := _succeeded()) >= t and count,
                                interval=0.05, what=f"{target} jobs to succeed before round "
                                                    f"{n + 1}")
        terminated += wait_until(lambda: (_terminate_worker_connections(),),
                                 what=f"round {n + 1} of terminations")[0]
    seconds = _finish(fleet, jobs, started)
    codes = fleet.stop()

    result = tally()
    reliability("terminations", max_attempts=max_attempts, seed=run_seed,
                workers=len(CONCURRENCIES), rounds=ROUNDS,
                terminated_connections=terminated, worker_exits=0, **result.figures(),
                seconds=seconds)
    result.assert_clean()
    assert codes == [0] * len(codes), fleet.output()[-5000:]
    assert terminated >= ROUNDS  # each round found the fleet connected: it made progress
