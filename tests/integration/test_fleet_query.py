"""The fleet-wide autoscaling reading (observability/fleet.py) against known ready, running and
busy rows; docs/autoscaling.md's SQL for KEDA gives the same desired count (PostgreSQL)."""

import datetime as dt
import json
import re
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from django_sqlqueue.observability import fleet
from django_sqlqueue.observability.autoscale import ScaleSettings
from tests.factories import JobFactory, WorkerFactory

pytestmark = pytest.mark.django_db
DOC = Path(__file__).resolve().parents[2] / "docs" / "autoscaling.md"
SETTINGS = ScaleSettings(minimum=0, maximum=sys.maxsize, target_wait=5.0, cooldown=60.0)


def known_rows(*, oldest_waited: float):
    """default: 3 due (the oldest waited ``oldest_waited`` s), 1 scheduled, 1 failed and due,
    1 expired, 2 running, 5 finished; emails: 1 due, 1 running; pdf: 4 due. Workers: two live
    serving default and emails (8 slots each), one serving pdf, one silent."""
    now = timezone.now()
    JobFactory(enqueued_at=now - dt.timedelta(seconds=oldest_waited))
    JobFactory.create_batch(2, enqueued_at=now - dt.timedelta(seconds=1))
    JobFactory(scheduled=True)
    JobFactory(failed=True, run_at=now - dt.timedelta(seconds=2))
    JobFactory(stale=True)
    JobFactory.create_batch(2, running=True)
    JobFactory.create_batch(5, succeeded=True)
    JobFactory(queue="emails", enqueued_at=now - dt.timedelta(seconds=3))
    JobFactory(queue="emails", running=True)
    JobFactory.create_batch(4, queue="pdf")
    WorkerFactory(queues=[], concurrency=8, jobs_done=40)
    WorkerFactory(queues=["emails", "default"], concurrency=8)
    WorkerFactory(queues=["pdf"], concurrency=2)
    WorkerFactory(queues=[], concurrency=8, lease_seconds=30,
                  last_heartbeat_at=now - dt.timedelta(seconds=31))


def test_the_reading_counts_due_running_and_live_slots_per_queue():
    known_rows(oldest_waited=20)
    reading = fleet.measure(queues=["default", "emails"])
    loads = {q.queue: q for q in reading.queues}
    assert sorted(loads) == ["default", "emails"]
    assert (loads["default"].due, loads["default"].running) == (4, 2)
    assert 20 <= loads["default"].oldest_due_age < 20 + 60
    assert (loads["emails"].due, loads["emails"].running) == (1, 1)
    assert (reading.processes, reading.slots, reading.concurrency) == (2, 16, 8)
    assert reading.busy_share == pytest.approx(3 / 16)
    assert set(reading.done.values()) == {40, 0}
    # 8 jobs on slots: one process; the oldest waited past the target: one more than live.
    assert reading.desired(SETTINGS) == 3

    everything = fleet.measure()
    assert [q.queue for q in everything.queues] == ["default", "emails", "pdf"]
    assert (everything.processes, everything.slots) == (3, 18)


def test_with_no_job_waiting_past_the_target_the_running_and_due_jobs_decide():
    known_rows(oldest_waited=2)
    assert fleet.measure(queues=["default", "emails"]).desired(SETTINGS) == 1
    JobFactory.create_batch(12, queue="emails")
    assert fleet.measure(queues=["default", "emails"]).desired(SETTINGS) == 3  # 20 on 8 slots


def test_nothing_to_do_wants_zero_processes():
    WorkerFactory(concurrency=8)
    JobFactory(scheduled=True)
    JobFactory(succeeded=True)
    reading = fleet.measure()
    assert (reading.desired(SETTINGS), reading.processes, reading.busy_share) == (0, 1, 0.0)


def test_stats_json_carries_the_reading(capsys):
    known_rows(oldest_waited=20)
    call_command("stats", "--json")
    document = json.loads(capsys.readouterr().out)["autoscale"]
    assert (document["due"], document["running"], document["live_processes"]) == (9, 3, 3)
    assert document["desired_processes"] == 4  # 12 jobs on 6-slot processes, one more: 4
    assert document["oldest_due_age_seconds"] >= 20
    assert [q["name"] for q in document["queues"]] == ["default", "emails", "pdf"]


def documented_sql() -> str:
    (sql,) = re.findall(r"```sql\n(-- desired worker processes.*?)```", DOC.read_text(), re.S)
    return sql


@pytest.mark.postgresql  # the documented statement is for KEDA's PostgreSQL scaler
@pytest.mark.parametrize("oldest_waited", [2, 20])
def test_the_documented_sql_gives_the_same_count(oldest_waited):
    known_rows(oldest_waited=oldest_waited)
    with connection.cursor() as cursor:
        cursor.execute(documented_sql())
        (desired,) = cursor.fetchone()
    assert desired == fleet.measure(queues=["default", "emails"]).desired(SETTINGS)


def test_the_reading_says_which_live_workers_run_a_job():
    busy, idle = WorkerFactory(host="h1", pid=11), WorkerFactory(host="h1", pid=12)
    JobFactory(running=True, claimed_by=busy.name)
    JobFactory(running=True, claimed_by="gone:1:abcdef")  # its worker is not live
    reading = fleet.measure()
    assert reading.busy == {("h1", 11)} and idle.pid not in {pid for _, pid in reading.busy}
    assert reading.running == 2


def test_the_keda_example_runs_the_documented_sql():
    def words(sql):
        text = " ".join(sql.replace("AS desired_processes", "").split()).rstrip(";")
        return text.replace("( ", "(").replace(" )", ")")

    statement = "\n".join(line for line in documented_sql().splitlines()
                          if not line.startswith("--"))
    (keda,) = re.findall(r"query: >-\n((?: {10}.*\n)+)", DOC.read_text())
    assert words(keda) == words(statement)
