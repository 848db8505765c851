"""``runworker --autoscale`` as a real process: a burst grows it to its maximum, idle slots
shrink it back one graceful retirement at a time, and a trickle changes nothing. States are
awaited (wait_until), events counted from the supervisor's lines; nothing is timed."""

import datetime as dt
import re
import signal

import pytest
from django.db.models import Count, F

from django_sqlqueue.models import Job, ScaleEvent, Worker
from django_sqlqueue.statuses import JobStatus
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import gated, record

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]
SETTINGS = {
    "LEASE_SECONDS": 3, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.2,
    # Jobs waiting longer than this are behind: the burst's are (they waited two minutes
    # already), the trickle's are not (each is alone, picked up within a poll).
    "AUTOSCALE_TARGET_WAIT_SECONDS": 20, "AUTOSCALE_COOLDOWN_SECONDS": 1,
    "AUTOSCALE_INTERVAL_SECONDS": 0.2,
}
EVENT = re.compile(r"supervisor: autoscale (\d+) -> (\d+): (.*)")


def events(worker) -> list:
    return [(int(before), int(after)) for before, after, _ in EVENT.findall(worker.output)]


def test_a_burst_grows_to_the_maximum_then_idle_slots_shrink_back_and_a_trickle_holds(
        start_worker, tmp_path):
    gate = tmp_path / "gate"
    # Eight jobs that hold their slot until the gate opens: with two slots per process they
    # need four processes, and while they run nothing is idle. Due two minutes ago.
    burst = [gated.enqueue(str(gate), tag="burst") for _ in range(8)]
    Job.objects.filter(pk__in=[j.pk for j in burst]).update(
        run_at=F("run_at") - dt.timedelta(minutes=2))
    worker = start_worker("--autoscale", "1:4", "--concurrency", "2", settings=SETTINGS)
    wait_until(lambda: Worker.objects.count() == 4
               and Job.objects.filter(status=JobStatus.RUNNING).count() == 8,
               what="four processes running the burst's eight jobs", timeout=120,
               worker=worker)
    assert "autoscaling 1 to 4 worker processes (target wait 20s, cool-down 1s" in worker.output
    assert events(worker) == [(1, 4)]
    assert "oldest due job waited" in worker.output

    gate.touch()  # the burst drains; then its slots sit idle
    wait_until(lambda: Worker.objects.count() == 1
               and worker.output.count("retired (exit code 0)") == 3,
               what="the supervisor back at one process", timeout=120, worker=worker)
    assert events(worker) == [(1, 4), (4, 3), (3, 2), (2, 1)]
    assert "slots idle for" in worker.output
    # The same changes, kept for the admin dashboard: this supervisor's, with their reasons.
    kept = list(ScaleEvent.objects.order_by("at", "id").values_list(
        "pid", "processes_before", "processes", "action"))
    assert kept == [(worker.pid, 1, 4, "grow"), (worker.pid, 4, 3, "shrink"),
                    (worker.pid, 3, 2, "shrink"), (worker.pid, 2, 1, "shrink")]
    assert {reason for (_, _, reason) in EVENT.findall(worker.output)} == set(
        ScaleEvent.objects.values_list("reason", flat=True))
    assert "restarting" not in worker.output  # a retired process is not a crashed one
    ran = dict(Execution.objects.values_list("job_id").annotate(n=Count("pk")))
    assert ran == {job.pk: 1 for job in burst}
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}

    # A trickle: one job at a time, each enqueued once the one before has run. It never
    # waits anywhere near the target, and one process is never idle enough to lose: no event.
    for n in range(15):
        job = record.enqueue(tag=f"trickle-{n}")
        wait_until(lambda job=job: Execution.objects.filter(job_id=job.pk).exists(),
                   what=f"trickle job {n} to run", timeout=60, worker=worker)
    assert events(worker) == [(1, 4), (4, 3), (3, 2), (2, 1)]
    assert Worker.objects.count() == 1
    assert Execution.objects.count() == 8 + 15

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output
    assert not Worker.objects.exists()
