"""The ``@job`` signals in a real ``runworker``: a worker killed mid-job, its job rescued by
another worker (job_rescued, from its maintenance thread) and run again (job_started and
job_finished on the job's thread), a failure written and retried (job_retried, from the outcome
writer's thread); each event sent exactly once."""

import collections
import json
import signal

import pytest

from django_sqlqueue.statuses import JobStatus
from tests.process.conftest import job_status
from tests.support.waiting import wait_started, wait_until
from tests.testapp.tasks import always_fails, sleep_for

pytestmark = pytest.mark.django_db(transaction=True)
FAST = {"LEASE_SECONDS": 3, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.2}


def test_rescued_started_finished_and_retried_once_each_from_their_threads(start_worker,
                                                                          tmp_path):
    killed = sleep_for.enqueue(1, tag="finished")
    doomed = start_worker(settings=FAST)
    wait_started(killed.pk, doomed)
    doomed.signal(signal.SIGKILL)
    doomed.wait()
    failing = always_fails.using(max_attempts=2, retry_backoff=0.1,
                                 retry_min_delay=0.1).enqueue("boom")

    log = tmp_path / "signals.jsonl"
    rescuer = start_worker(
        settings=FAST, env={"SQLQUEUE_TEST_SIGNAL_LOG": str(log)},
    )
    wait_until(lambda: job_status(killed.pk) == JobStatus.SUCCEEDED
               and job_status(failing.pk) == JobStatus.EXHAUSTED,
               what="the rescue, the re-run and the retry", worker=rescuer, timeout=40)
    rescuer.signal(signal.SIGTERM)
    assert rescuer.wait() == 0, rescuer.output

    lines = [json.loads(line) for line in log.read_text().splitlines()]
    counts = collections.Counter((line["signal"], line["job"]) for line in lines)
    assert counts == {
        ("job_rescued", killed.pk): 1,
        ("job_started", killed.pk): 1, ("job_finished", killed.pk): 1,
        ("job_started", failing.pk): 2, ("job_finished", failing.pk): 2,
        ("job_retried", failing.pk): 1,
    }, lines
    by_signal = {(line["signal"], line["job"], line["attempts"]): line for line in lines}
    rescued = by_signal["job_rescued", killed.pk, 1]
    assert rescued["status"] == JobStatus.QUEUED and rescued["will_retry"] is True
    assert "is dead" in rescued["reason"] or "lease" in rescued["reason"]
    assert rescued["thread"] == "sqlqueue-maintenance"
    finished = by_signal["job_finished", killed.pk, 2]
    assert finished["outcome"] == "succeeded" and finished["thread"].startswith("sqlqueue-job-")
    assert by_signal["job_started", killed.pk, 2]["thread"] == finished["thread"]
    last = by_signal["job_finished", failing.pk, 2]
    assert (last["outcome"], last["will_retry"], last["exception"]) == ("failed", False, "boom")
    assert by_signal["job_retried", failing.pk, 1]["thread"] == "sqlqueue-outcomes"
