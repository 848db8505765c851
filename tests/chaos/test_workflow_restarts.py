"""A fan-out/fan-in through kills and a database restart (issue 26's "done when"): one chord
whose group workers run while some of them are SIGKILLed and the database server is restarted
once, all during the fan-out. Nothing is lost (every job ends succeeded, with a finished run of
its last attempt), the callback runs exactly once, and it starts only after every member of its
group had run to its end and received their results in the group's order (``flow_step``'s
``expect``: a callback given a result missing or out of order aborts, and the job would not
succeed).

The chaos is reached by construction, not by time: each kill and the restart happen once a
share of the group has recorded its runs (the ``Run`` ledger, tests/chaos/ledger.py). Each kill's
victim is the worker running the member at that share, which holds its slot until a gate opens
after the kill, so every kill interrupts a group job; one member is held back (due in an hour)
until the last event, then made due (``run_now``), so every event falls in the fan-out, the
callback still waiting, however fast the fleet is.

Sizes: one chord of 1,000 group jobs by default; ``SQLQUEUE_WORKFLOW_CHAOS=full`` (or
``SQLQUEUE_SOAK=1``) one chord of 10,000, the issue's size."""

import os
import random
import time

import pytest
from django.db import connections

from django_sqlqueue.models import Job, JobDependency
from django_sqlqueue.statuses import FINISHED_STATUSES, JobStatus
from django_sqlqueue.workflows import chord
from tests.chaos.conftest import SOAK, elapsed
from tests.chaos.ledger import tally
from tests.support.fleet import Fleet, seed
from tests.support.waiting import wait_until
from tests.testapp.models import Run
from tests.testapp.tasks import flow_step

pytestmark = [pytest.mark.server_database, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(1800)]

FULL = SOAK or os.environ.get("SQLQUEUE_WORKFLOW_CHAOS") == "full"
GROUP = 10_000 if FULL else 1_000
CONCURRENCIES = (4, 4, 4)
#: When each event happens, as the share of the group's runs recorded: kills, then the restart
#: in the middle of the fan-out, then a kill while the workers are back from it.
KILLS_BEFORE, RESTART_AT, KILLS_AFTER = (0.1, 0.25), 0.4, (0.6,)
# test_kills.py's lease and maintenance (a dead worker's jobs rescued at the next pass, no limit
# on interruptions) and test_database_outages.py's retries (a job whose own writes fail while
# the database is away runs again after 0.2 s, 0.4 s, ...).
SETTINGS = {
    "LEASE_SECONDS": 10, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.3,
    "BACKOFF_SECONDS": 0.2, "MIN_RETRY_DELAY_SECONDS": 0.2,
    "MAX_RETRY_DELAY_SECONDS": 10, "MAX_ATTEMPTS": 25,
}
# Its jobs' interruptions are out of reach (a job may be hit by several kills): a job's own
# bound, set when it is enqueued (a worker's SQLQUEUE setting does not change it).
STEP = flow_step.using(max_interruptions=1000)


def _group_runs(callback: int) -> int:
    return Run.objects.exclude(job_id=callback).count()


def _holding(job_id: int) -> set:
    """The pids of the processes in a run of ``job_id`` that has not finished."""
    return set(Run.objects.filter(job_id=job_id, finished_at__isnull=True)
               .values_list("pid", flat=True))


@pytest.fixture
def restart_database(pg_cluster, mariadb_server):
    """Restart the suite's own database server (PostgreSQL: ``pg_ctl restart -m fast``;
    MariaDB: a clean shutdown and start on the same port)."""
    server = pg_cluster or mariadb_server
    if server is None:
        pytest.skip("needs the suite's own server (DATABASE_URL names an outside server)")

    def restart():
        # restart() returns once the server stopped and answers again (pg_ctl restart -w;
        # MariaDB's stop, then start): that it returned is the proof. (A connection made before
        # it is no proof behind PgBouncer, which keeps its clients' connections across it.)
        server.restart(mode="fast")
        connections.close_all()

    return restart


def test_kills_and_a_database_restart_during_a_fan_out_lose_nothing_and_run_the_callback_once(
        start_worker, restart_database, reliability, tmp_path):
    rng = random.Random(run_seed := seed())
    tags = [f"member-{n}" for n in range(GROUP)]
    # Each kill's victim is the worker running the member at that share of the group: it holds
    # its slot until its gate (a file) opens, after the kill, so that worker is running a group
    # job when it dies, however fast the others drain the rest. The last member is held back (due
    # in an hour) until every event has happened: so each one falls in the fan-out, with the
    # callback waiting.
    gates = {int(GROUP * share): tmp_path / f"gate-{share}" for share in KILLS_BEFORE + KILLS_AFTER}
    steps = [STEP.s(tag=tag, sleep_ms=5, gate=str(gates[n]) if n in gates else None)
             for n, tag in enumerate(tags[:-1])]
    steps.append(STEP.s(tag=tags[-1], sleep_ms=5).using(delay=3600))
    flow = chord(steps, STEP.s(tag="callback", expect=[tags])).enqueue()
    members, callback = [job.pk for job in flow.jobs[:-1]], flow.jobs[-1].pk
    started = time.monotonic()
    fleet = Fleet(start_worker, CONCURRENCIES, settings=SETTINGS)
    events = [(share, "kill") for share in KILLS_BEFORE] + [(RESTART_AT, "restart")]
    events += [(share, "kill") for share in KILLS_AFTER]

    for share, event in events:
        target = int(GROUP * share)
        if event == "kill":
            gated = members[target]
            fleet.wait_until(lambda job_id=gated: fleet.kill(rng, among=_holding(job_id)),
                             what=f"a worker running member {target} (gated) to kill",
                             timeout=900)
            gates[target].touch()
        else:
            fleet.wait_until(lambda t=target: _group_runs(callback) >= t,
                             what=f"{target} group runs before the restart", timeout=900)
            restart_database()
        # Each event fell in the fan-out: the callback still waits, with members unfinished.
        assert Job.objects.get(pk=callback).status == JobStatus.WAITING
        assert Job.objects.filter(pk__in=members).exclude(
            status=JobStatus.SUCCEEDED).exists()
    assert Job.objects.filter(pk=members[-1]).run_now() == 1  # the held member, due now

    wait_until(lambda: Job.objects.get(pk=callback).status in FINISHED_STATUSES,
               what="the callback to finish", timeout=1500, interval=0.5,
               context=lambda: (f"{Job.objects.filter(status=JobStatus.SUCCEEDED).count()} of "
                                f"{GROUP + 1} succeeded"))
    seconds = elapsed(started)
    assert fleet.running(), f"a worker exited: {fleet.dead()}"
    codes = fleet.stop()

    result = tally()
    callback_runs = list(Run.objects.filter(job_id=callback))
    last_member_end = max(Run.objects.filter(job_id__in=members, finished_at__isnull=False)
                          .values_list("finished_at", flat=True))
    reliability("workflow kills and restart", seed=run_seed, group=GROUP,
                kills=len(fleet.killed), restarts=1, **result.figures(), seconds=seconds)
    result.assert_clean()  # nothing lost; every run again was the queue's decision
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == GROUP + 1
    # Every member has a run that finished (a member may have run more than once: a kill).
    assert Run.objects.filter(job_id__in=members, finished_at__isnull=False).values(
        "job_id").distinct().count() == GROUP
    # The callback: released once, run once, after every member's end.
    assert len(callback_runs) == 1, [(run.attempt, run.worker) for run in callback_runs]
    assert Job.objects.get(pk=callback).attempts == 1
    assert callback_runs[0].started_at >= last_member_end
    assert not JobDependency.objects.filter(child_id=callback, resolved_at__isnull=True).exists()
    assert len(fleet.killed) == len(KILLS_BEFORE) + len(KILLS_AFTER)
    assert result.rescued > 0, "no kill landed on a running job"
    assert codes == [0] * len(codes), fleet.output()[-5000:]
