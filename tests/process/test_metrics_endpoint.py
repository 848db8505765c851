"""``runworker --metrics-port`` as real processes: what a scrape says matches the jobs run."""

import os
import re
import signal
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import UNFINISHED_STATUSES, JobStatus
from tests.support.waiting import wait_until
from tests.testapp.models import Execution
from tests.testapp.tasks import always_fails, record, sleep_for

pytestmark = pytest.mark.django_db(transaction=True)
# A long lease: on a busy machine a short one may run out, and a job run twice would be counted
# twice, rightly, but no longer match the table.
SETTINGS = {"LEASE_SECONDS": 30, "POLL_INTERVAL_SECONDS": 0.2}
RECORD, FAILS, SLEEP = "tests.record", "tests.testapp.tasks.always_fails", "tests.sleep"


def endpoint(worker) -> tuple:
    """(port, multiprocess directory or None) from the line the command prints."""
    line = wait_until(lambda: re.search(r"metrics: http://[\d.]+:(\d+)/metrics \(Prometheus, "
                                        r"(?:summed over the worker processes from (\S+)\)|of)",
                                        worker.output),
                      what="the metrics line", worker=worker)
    return int(line[1]), line[2]


def scrape(port) -> dict:
    """{(sample name, ((label, value), ...)): value} of one scrape."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def scrape_until(port, condition, **wait) -> dict:
    """The first scrape for which ``condition(samples)`` holds."""

    def scraped():
        samples = scrape(port)
        return samples if condition(samples) else None

    return wait_until(scraped, **wait)


def value(samples, name, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def runs_by_task() -> dict:
    """Attempts that actually ran, from what they left behind: ``record`` one Execution row per
    run, the sleeper one "started" row, ``always_fails`` one error entry. (Job.attempts counts
    claims, and a worker that recycles releases the jobs it claimed ahead unrun.)"""
    def ids(task):
        return Job.objects.filter(task_name=task).values("pk")

    return {
        RECORD: Execution.objects.filter(job_id__in=ids(RECORD)).count(),
        SLEEP: Execution.objects.filter(job_id__in=ids(SLEEP), tag="started").count(),
        FAILS: sum(len(errors) for errors in Job.objects.filter(task_name=FAILS)
                   .values_list("errors", flat=True)),
    }


def finished_by(samples) -> dict:
    """{(task, outcome): count} of sqlqueue_jobs_finished_total."""
    return {(dict(labels)["task"], dict(labels)["outcome"]): v
            for (name, labels), v in samples.items() if name == "sqlqueue_jobs_finished_total"}


@pytest.mark.parametrize("start_method, env", [
    # Forked children, from a supervisor whose settings imported prometheus_client first.
    ("fork", {"SQLQUEUE_TEST_IMPORT_PROMETHEUS_CLIENT": "1"}),
    ("spawn", {}),
])
def test_a_scrape_during_a_drain_with_two_processes_counts_the_jobs_run(start_worker, tmp_path,
                                                                       start_method, env):
    Job.objects.bulk_enqueue(record.prepare(tag=str(n)) for n in range(150))
    always_fails.using(retry_backoff=0.1, retry_min_delay=0.1).enqueue("nope")  # 3 attempts
    # Each sleeper holds its slot until the gate opens (after the scrape during the drain), then
    # sleeps 0.8 s.
    gate = tmp_path / "gate"
    sleepers = [sleep_for.enqueue(0.8, gate=str(gate)) for _ in range(2)]
    # --max-jobs: the children recycle during the drain; the counts of the processes that
    # exited must stay in the sums.
    worker = start_worker("--processes", "2", "-c", "2", "--max-jobs", "40",
                          "--start-method", start_method,
                          "--metrics-port", "0", "--metrics-address", "127.0.0.1",
                          settings=SETTINGS, env=env)
    port, directory = endpoint(worker)
    assert directory and Path(directory).is_dir()

    # During the drain: a sleeping job holds a slot; the live processes are the two children,
    # or one while the other is being replaced (a recycle). The sleepers were enqueued last: a
    # sleeper starts once the children, recycled at least once, have run the other jobs.
    wait_until(lambda: Execution.objects.filter(job_id__in=[j.pk for j in sleepers],
                                                tag="started").exists(),
               timeout=120, what="a sleeper running", worker=worker)
    during = scrape(port)
    gate.touch()
    assert value(during, "sqlqueue_worker_busy_slots", queue="default") >= 1
    assert value(during, "sqlqueue_worker_processes") in (1, 2)
    assert value(during, "sqlqueue_worker_slots") == 2 * value(during, "sqlqueue_worker_processes")

    wait_until(lambda: not Job.objects.filter(status__in=UNFINISHED_STATUSES).exists(),
               timeout=120, what="the drain", worker=worker)
    runs = runs_by_task()
    assert runs == {RECORD: 150, SLEEP: 2, FAILS: 3}
    # An outcome is counted once written, just after its row changed: poll the endpoint.
    done = scrape_until(port, lambda s: sum(finished_by(s).values()) == sum(runs.values()),
                        what="every outcome counted", worker=worker)
    assert "recycling: ran 40 jobs (--max-jobs)" in worker.output

    for task, n in runs.items():
        assert value(done, "sqlqueue_jobs_started_total", queue="default", task=task) == n
        assert value(done, "sqlqueue_jobs_run_duration_seconds_count", queue="default",
                     task=task) == n
        assert value(done, "sqlqueue_jobs_pickup_latency_seconds_count", queue="default",
                     task=task) == n
    assert finished_by(done) == {(RECORD, "succeeded"): 150, (SLEEP, "succeeded"): 2,
                                 (FAILS, "failed"): 2, (FAILS, "exhausted"): 1}
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == 152
    assert value(done, "sqlqueue_jobs_retried_total", queue="default", task=FAILS) == 2
    # Each sleeper ran 0.8 s; the histogram's sum says so.
    assert value(done, "sqlqueue_jobs_run_duration_seconds_sum", queue="default",
                 task=SLEEP) >= 2 * 0.8
    # The recycled children's gauges left with them: two live processes (once the last one
    # replaced has started), nothing running.
    scrape_until(port, lambda s: value(s, "sqlqueue_worker_processes") == 2,
                 what="two live processes", worker=worker)
    assert value(done, "sqlqueue_worker_busy_slots", queue="default") == 0

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output
    assert not Path(directory).exists()  # the supervisor's own directory is removed


def test_one_process_serves_its_own_counts(start_worker):
    Job.objects.bulk_enqueue(record.prepare(tag=str(n)) for n in range(5))
    worker = start_worker("--metrics-port", "0", "--metrics-address", "127.0.0.1",
                          settings=SETTINGS)
    port, directory = endpoint(worker)
    assert directory is None
    samples = scrape_until(port, lambda s: value(s, "sqlqueue_jobs_finished_total",
                                                 queue="default", task=RECORD,
                                                 outcome="succeeded") == 5,
                           what="5 successes counted", worker=worker)
    assert value(samples, "sqlqueue_jobs_started_total", queue="default", task=RECORD) == 5
    assert value(samples, "sqlqueue_worker_processes") == 1
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output


def test_a_killed_child_leaves_no_live_process_or_busy_slot_behind(start_worker):
    """Its gauges are dropped when the supervisor sees it die (a recycle sets them to 0 itself;
    a SIGKILL gives no chance to)."""
    job = sleep_for.enqueue(60)
    worker = start_worker("--processes", "2", "-c", "2", "--metrics-port", "0",
                          "--metrics-address", "127.0.0.1", settings=SETTINGS)
    port, _ = endpoint(worker)
    running = wait_until(lambda: Execution.objects.filter(job_id=job.pk, tag="started").first(),
                         what="the sleeper running", worker=worker)
    scrape_until(port, lambda s: value(s, "sqlqueue_worker_busy_slots", queue="default") == 1
                 and value(s, "sqlqueue_worker_processes") == 2,
                 what="one busy slot, two processes", worker=worker)
    os.kill(int(running.worker.split(":")[1]), signal.SIGKILL)  # name:pid:suffix
    # The replacement's banner: its gauges are set by then.
    wait_until(lambda: worker.output.count("django-sqlqueue ") == 3, what="the replacement",
               worker=worker)
    after = scrape(port)
    assert value(after, "sqlqueue_worker_processes") == 2  # not 3
    assert value(after, "sqlqueue_worker_busy_slots", queue="default") == 0
    assert value(after, "sqlqueue_worker_slots") == 4
    # Its counters stay: the attempt it started is still counted.
    assert value(after, "sqlqueue_jobs_started_total", queue="default", task=SLEEP) == 1
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output
