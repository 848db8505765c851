"""Scenario 9, failover: the primary dies (SIGKILL of every one of its processes, as a machine that
dies) while 4 processes enqueue 5,000 jobs, one per transaction, and 4 workers drain them; a
second later the standby is promoted (``pg_ctl promote``, what a failover manager does once it
has seen the primary gone). Everyone connects through one multi-host connection string with
``target_session_attrs=read-write`` (tests/postgres_pair.py), so they find the new primary on
their own, LISTEN again there, and one of them leads maintenance there. A schedule ticks every
2 s throughout: with the synchronous standby, no tick is skipped or doubled by the failover.

- With a **synchronous** standby, every enqueue that returned is on the new primary and runs;
  every job present succeeds, at one attempt (an interruption uses none); a job ran twice only
  where the queue recorded its earlier run as interrupted by the outage (ledger.py).
- With **asynchronous** replication, the commits the standby had not received are gone: the
  test holds the standby STALL_SECONDS behind before the crash, counts the acknowledged enqueues
  that are missing (``lost_acknowledged``), and asserts only that the rest ran and the fleet came
  through. Lost claims are lost too: a job a worker claimed in that window is ready again on the
  new primary. A worker reads back the claims of the jobs it holds unstarted once the database
  is back, and drops the lost ones (``claims_dropped``), so another worker's run is the only one;
  a job the first worker had already started under a lost claim can still run twice at once
  (nothing can fence a claim the database no longer knows). The ledger counts those as hand-off
  violations; they are reported, not asserted, here.

An enqueue that raised (its commit's answer was cut) is tried again under the same key, so a
key may end up with two jobs: one whose commit happened without its answer. That is the
at-least-once of any enqueue over a network; ``ambiguous_enqueues`` counts them.
"""

import datetime as dt
import functools
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connections
from django.db.models.functions import Now
from django.utils import timezone

from django_sqlqueue.models import Job, Leader
from django_sqlqueue.statuses import UNFINISHED_STATUSES, JobStatus
from tests.chaos.conftest import VENDOR, elapsed, sized
from tests.chaos.ledger import tally
from tests.postgres_cluster import find_bindir
from tests.postgres_pair import Pair
from tests.support.fleet import Fleet
from tests.support.waiting import wait_until
from tests.testapp.models import Run

pytestmark = [pytest.mark.postgresql]

ROOT = Path(__file__).resolve().parents[2]
NAME = "sqlqueue_failover"
ALIAS = "pair"  # this process's connection to the pair
JOBS = sized(5_000, 50_000)
ENQUEUERS = 4
CONCURRENCIES = (1, 2, 4, 2)
# At one attempt: a failover must never fail a job, only interrupt it.
SETTINGS = {
    "LEASE_SECONDS": 5, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.3,
    "MAX_ATTEMPTS": 1,
}
SCHEDULE, TICK = "every-2s", dt.timedelta(seconds=2)  # tests/testapp/periodic.py
# The time a failover manager takes to see the primary gone before it promotes (Patroni's and
# pg_auto_failover's defaults are tens of seconds; 1 s keeps the run short, and the queue does
# not care how long: workers and enqueuers retry until a primary answers).
DETECTION_SECONDS = 1.0
# Asynchronous replication on one machine lags by well under a millisecond: a crash then loses
# next to nothing (0 acknowledged enqueues in our runs), which says nothing about a real link. So
# the asynchronous run holds the primary's WAL sender still for this long before the crash (a
# link that far behind), and counts what the primary acknowledged meanwhile and lost.
STALL_SECONDS = 0.5
# Enqueuers pause 0-6 ms between enqueues, so that enqueuing lasts several seconds and the crash
# lands in the middle of it, as it would under a steady stream of web requests.
MAX_PAUSE_MS = 6
# Enqueuing takes about 10 s; an enqueuer still at it after this gives up and fails the test.
ENQUEUE_DEADLINE = sized(120, 1200)
# What a worker logs for each held job it drops because the database lost its claim.
CLAIM_LOST = "claim lost while the database was in trouble"


@pytest.fixture(params=[True, False], ids=["synchronous", "asynchronous"])
def pair(request):
    if VENDOR == "pgbouncer":
        pytest.skip("runs in the postgresql pass: the pair is its own servers, reached directly")
    if "DATABASE_URL" in os.environ:
        try:
            find_bindir()
        except RuntimeError:
            pytest.skip("needs PostgreSQL's server binaries for a pair of its own")
    pair = Pair(synchronous=request.param)
    try:
        pair.start().create_database(NAME)
        yield pair
    finally:
        pair.destroy()


@pytest.fixture
def on_pair(pair, django_db_blocker):
    """The pair as the alias "pair" of this process; its ``DATABASES`` entry for subprocesses
    (tests/settings.py reads it from SQLQUEUE_TEST_DATABASES_JSON), migrated."""
    entry = pair.django_database(NAME)
    env = {"SQLQUEUE_TEST_DATABASES_JSON": json.dumps({"default": entry})}
    migrate = subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--noinput", "-v", "0"], cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **env},
        capture_output=True, text=True, timeout=120,
    )
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    connections.settings[ALIAS] = connections.configure_settings({"default": entry})["default"]
    with django_db_blocker.unblock():
        yield env
        connections[ALIAS].close()
    del connections[ALIAS]  # the next parametrization's pair has other ports
    del connections.settings[ALIAS]


class Enqueuers:
    """ENQUEUERS processes of tests/chaos/enqueuer.py, each enqueuing its share of ``count``."""

    def __init__(self, count, env, tmp_path):
        self.outs = [tmp_path / f"enqueuer-{n}.txt" for n in range(ENQUEUERS)]
        self.logs = [open(tmp_path / f"enqueuer-{n}.log", "w") for n in range(ENQUEUERS)]
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.chaos.enqueuer", f"p{n}", str(count // ENQUEUERS),
                 str(out), "--max-pause-ms", str(MAX_PAUSE_MS),
                 "--deadline-seconds", str(ENQUEUE_DEADLINE)],
                cwd=ROOT, env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **env},
                stdout=log, stderr=subprocess.STDOUT,
            )
            for n, (out, log) in enumerate(zip(self.outs, self.logs, strict=True))
        ]

    def lines(self, kind):
        found = []
        for out in self.outs:
            if out.exists():
                found += [line.split(" ", 3) for line in out.read_text().splitlines()
                          if line.startswith(kind + " ")]
        return found

    def acks(self) -> list:  # (job id, key, t)
        return [(int(pk), key, float(t)) for _, pk, key, t in self.lines("ack")]

    def errors(self) -> list:  # (key, t)
        return [(key, float(t)) for _, key, t, *_ in self.lines("error")]

    def wait(self, timeout):
        for proc in self.procs:
            proc.wait(timeout=timeout)
        for log in self.logs:
            log.close()
        return [proc.returncode for proc in self.procs]

    def stop(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def output(self):
        return "\n".join(Path(log.name).read_text()[-2000:] for log in self.logs)


def _listeners() -> int:
    with connections[ALIAS].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND query LIKE 'LISTEN %%'")
        return cursor.fetchone()[0]


def _tick_jobs() -> list:
    """Jobs of the 2-second schedule of tests/testapp/periodic.py (workers started with
    SQLQUEUE_TEST_SCHEDULES=1 tick it)."""
    return [job for job in Job.objects.using(ALIAS).filter(
        unique_key__startswith=f"schedule:{SCHEDULE}@") if job.schedule_name == SCHEDULE]


def _ticks_after(moment) -> list:
    return sorted(job.schedule_tick for job in _tick_jobs() if job.schedule_tick > moment)


def _count(**filters):
    return Job.objects.using(ALIAS).filter(**filters).count()


def test_failover_under_load(pair, on_pair, start_worker, tmp_path, reliability):
    started = time.monotonic()
    fleet = Fleet(functools.partial(start_worker, env={**on_pair, "SQLQUEUE_TEST_SCHEDULES": "1"}),
                  CONCURRENCIES, settings=SETTINGS)
    enqueuers = Enqueuers(JOBS, on_pair, tmp_path)
    try:
        # Mid-run: a third of the enqueues acknowledged, the workers at work on them, and the
        # schedule ticking.
        wait_until(lambda: len(enqueuers.acks()) >= JOBS // 3
                 and _count(status=JobStatus.SUCCEEDED) > 0 and _tick_jobs(),
                 timeout=120, interval=0.02, what="a third of the enqueues")
        if not pair.synchronous:
            # The standby falls behind by STALL_SECONDS of commits, as over a slow link.
            pair.stall_replication()
            time.sleep(STALL_SECONDS)
        behind = pair.flush_lag_bytes()
        crashed_at, crashed_wall = time.monotonic(), timezone.now()
        pair.crash()
        time.sleep(DETECTION_SECONDS)
        pair.promote()
        promoted_at = time.monotonic()
        codes = enqueuers.wait(timeout=ENQUEUE_DEADLINE + 30)
        assert codes == [0] * ENQUEUERS, enqueuers.output()
        acks = enqueuers.acks()
        assert len(acks) == JOBS
        # Finished when no job is left to run (a lost one never shows up to wait for).
        fleet.wait_until(lambda: _count() > 0 and _count(status__in=UNFINISHED_STATUSES) == 0,
                       timeout=sized(240, 1800), interval=0.5,
            what="every job on the new primary to finish")
        seconds = elapsed(started)
        # The schedule ticks on the new primary: two ticks after the promotion.
        promoted_wall = timezone.now() - dt.timedelta(seconds=time.monotonic() - promoted_at)
        fleet.wait_until(lambda: len(_ticks_after(promoted_wall)) >= 2 and not _count(
            status__in=UNFINISHED_STATUSES), what="two ticks after the failover", timeout=60)
        # Every worker LISTENs on the new primary again, and one of them leads maintenance.
        fleet.wait_until(lambda: _listeners() == len(CONCURRENCIES),
                         what="LISTEN on the new primary")
        fleet.wait_until(lambda: Leader.objects.using(ALIAS).filter(
            name="maintenance", expires_at__gt=Now()).exists(), what="a maintenance leader")
        assert fleet.running(), f"a worker exited: {fleet.dead()}"
        exit_codes = fleet.stop()
    finally:
        enqueuers.stop()

    connections[ALIAS].close()
    errors = enqueuers.errors()
    after_crash = [t for _, _, t in acks if t > crashed_at]
    jobs_by_key = Counter(Job.objects.using(ALIAS).filter(task_name="chaos.work")
                          .values_list("payload__kwargs__key", flat=True))
    ran = set(Run.objects.using(ALIAS).exclude(finished_at=None).values_list("job_id", "key"))
    lost = [(pk, key) for pk, key, _ in acks if (pk, key) not in ran]
    result = tally(Job.objects.using(ALIAS).filter(task_name="chaos.work")
                   .values_list("pk", flat=True), using=ALIAS)
    ticks = Counter(job.schedule_tick for job in _tick_jobs())
    first, last = min(ticks), max(ticks)
    missing = [first + k * TICK for k in range((last - first) // TICK + 1)
               if first + k * TICK not in ticks]
    doubled = [tick for tick, n in ticks.items() if n > 1]
    mode = "synchronous" if pair.synchronous else "asynchronous"
    reliability(
        f"failover ({mode})", workers=len(CONCURRENCIES), enqueuers=ENQUEUERS,
        acknowledged=len(acks), lost_acknowledged=len(lost),
        unacknowledged_attempts=len(errors),
        ambiguous_enqueues=sum(1 for n in jobs_by_key.values() if n > 1),
        standby_behind_bytes=behind,
        standby_behind_seconds=0 if pair.synchronous else STALL_SECONDS,
        # From the crash to the first enqueue acknowledged by the new primary.
        enqueues_resumed_after_seconds=round(
            min((t for t in after_crash if t > promoted_at), default=-1) - crashed_at, 2),
        promoted_after_seconds=round(promoted_at - crashed_at, 2), worker_exits=0,
        schedule_ticks=len(ticks), ticks_missing=len(missing), ticks_doubled=len(doubled),
        # Held jobs a worker dropped unstarted because the new primary had lost their claims
        # (worker/pool.py reads its claims back after the outage).
        claims_dropped=fleet.output().count(CLAIM_LOST),
        **result.figures(), seconds=seconds,
    )

    # The crash landed mid-run: enqueues failed during the outage and resumed after it.
    assert errors and min(t for _, t in errors) >= crashed_at - 0.1
    assert [t for t in after_crash if t > promoted_at]
    assert exit_codes == [0] * len(exit_codes), fleet.output()[-5000:]
    assert "database unavailable" in fleet.output()
    assert result.executions >= len(acks) - len(lost)
    assert first < crashed_wall < last, "the schedule did not tick across the failover"
    if pair.synchronous:
        assert not lost, f"{len(lost)} acknowledged enqueue(s) lost, e.g. {lost[:5]}"
        result.assert_clean()
        # A tick is its job's insert and the schedule's cursor in one transaction: neither
        # skipped nor doubled by the failover.
        assert not missing and not doubled, (missing, doubled)
