"""The embedded worker in real web servers (docs/operations.md, "A worker in the web process"):
gunicorn (sync and gthread workers), uvicorn (the ASGI lifespan) and runserver, each serving
requests while its worker processes drain the queue, then stopped as an operator stops them."""

import json
import os
import signal

import pytest

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.worker import identity
from tests.support.waiting import StopWaiting, wait_until
from tests.support.web_server import PROCESSES, WebServer
from tests.testapp.models import Execution
from tests.testapp.tasks import record, sleep_for

pytestmark = pytest.mark.django_db(transaction=True)
SERVERS = ["gunicorn-sync", "gunicorn-gthread", "uvicorn", "runserver"]
#: Those whose stop gives running jobs the shutdown timeout (runserver's reloader kills its child
#: a quarter of a second after Ctrl-C: see its own test).
GRACEFUL = ["gunicorn-sync", "gunicorn-gthread", "uvicorn", "runserver-noreload"]
FAST = {"LEASE_SECONDS": 3, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.2}


@pytest.fixture
def start_server(db_url, tmp_path):
    started = []

    def start(kind, embedded=True):
        settings = {**FAST, "EMBEDDED_WORKER": embedded}
        server = WebServer(kind, {"DATABASE_URL": db_url(),
                                  "SQLQUEUE_TEST_SETTINGS": json.dumps(settings)},
                           tmp_path / f"{kind}-{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def answering(server):
    """A ping's answer once the server serves (None before); fails at once if it exited."""
    if server.proc.poll() is not None:
        raise StopWaiting(f"{server.kind} exited:\n{server.output}")
    status, body = server.get("ping")
    return body if status == 200 else None


def stop(server):
    """Stop ``server`` as its operator does, and wait until each of its processes exited:
    runserver's Ctrl-C ends its reloader at once, and its serving child after its stop."""
    pids = set(Worker.objects.values_list("pid", flat=True))
    server.shut_down()
    assert server.wait() in (0, -2), server.output  # runserver's reloader may die of SIGINT
    wait_until(lambda: not any(identity.pid_alive(pid) for pid in pids),
               what=f"every process of {server.kind} to exit", context=lambda: server.output)


def executions(tag):
    return sorted(Execution.objects.filter(tag=tag).values_list("job_id", flat=True))


@pytest.mark.parametrize("kind", SERVERS)
def test_serves_requests_while_its_processes_drain_the_queue(start_server, kind):
    jobs = Job.objects.bulk_enqueue(record.prepare(tag="drained") for _ in range(60))
    server = start_server(kind, {"CONCURRENCY": 2, "SHUTDOWN_TIMEOUT_SECONDS": 3})
    wait_until(lambda: answering(server), what=f"{kind} to serve", timeout=60)
    answered_by = set()

    def drained():
        body = answering(server)  # a request between every look: served while jobs run
        answered_by.add(body["pid"])
        return body["unfinished"] == 0

    wait_until(drained, what="the jobs to drain", timeout=60, context=lambda: server.output)
    # One embedded worker per serving process, each in a process that answers requests.
    workers = wait_until(lambda: len(rows := list(Worker.objects.all())) == PROCESSES[kind]
                         and rows, what="every embedded worker registered",
                         context=lambda: server.output)
    assert {w.pid for w in workers} >= answered_by, server.output
    assert executions("drained") == sorted(job.pk for job in jobs)  # each ran exactly once
    assert Job.objects.filter(status=JobStatus.SUCCEEDED).count() == len(jobs)
    stop(server)
    assert not Worker.objects.exists(), server.output  # every worker unregistered


@pytest.mark.parametrize("kind", GRACEFUL)
def test_a_stop_lets_running_jobs_finish_and_gives_back_the_rest(start_server, kind):
    short = [sleep_for.enqueue(1.0, tag="finished") for _ in range(2)]
    long = sleep_for.enqueue(600, tag="finished")
    server = start_server(kind, {"CONCURRENCY": 3, "SHUTDOWN_TIMEOUT_SECONDS": 3})
    wait_until(lambda: Execution.objects.filter(tag="started").count() == 3,
               what="the three jobs to start", timeout=60, context=lambda: server.output)
    stop(server)
    # The short ones finished within the shutdown timeout, once each.
    assert executions("finished") == sorted(job.pk for job in short), server.output
    assert all(Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED for job in short)
    # The long one was given back, its attempt and interruption uncounted; nothing is running.
    long.refresh_from_db()
    assert (long.status, long.interruptions) == (JobStatus.QUEUED, 0)
    assert (long.attempts, long.max_attempts) == (1, 6)  # the attempt was given back
    assert not Job.objects.filter(status=JobStatus.RUNNING).exists()
    assert not Worker.objects.exists(), server.output


def test_gunicorn_recycling_its_processes_loses_and_repeats_no_job(start_server):
    jobs = Job.objects.bulk_enqueue(sleep_for.prepare(0.2, tag="finished") for _ in range(40))
    server = start_server("gunicorn-recycling", {"CONCURRENCY": 2, "SHUTDOWN_TIMEOUT_SECONDS": 5})
    answered_by = set()

    def drained_and_recycled():
        body = answering(server)  # every 10 requests to a process replace it
        answered_by.add(body["pid"])
        return body["unfinished"] == 0 and len(answered_by) > PROCESSES["gunicorn-recycling"]

    wait_until(drained_and_recycled, what="the jobs to drain and a web process to recycle",
               timeout=120, context=lambda: server.output)
    # Each recycle stopped its worker as a SIGTERM does: the running jobs finished once.
    assert executions("finished") == sorted(job.pk for job in jobs), server.output
    assert not Job.objects.exclude(status=JobStatus.SUCCEEDED).exists()
    stop(server)
    assert not Worker.objects.exists(), server.output


def test_a_web_process_killed_mid_job_loses_no_job(start_server):
    """The OOM killer's SIGKILL on a gunicorn web process while its embedded worker runs jobs:
    gunicorn starts another, the killed worker's jobs come back when their leases run out (an
    interruption each, WorkerLost), and every job finishes exactly once."""
    jobs = Job.objects.bulk_enqueue(sleep_for.prepare(5.0, tag="finished") for _ in range(8))
    server = start_server("gunicorn-sync", {"CONCURRENCY": 2})
    # A job seen started has 5 s of sleep left: it is mid-run when its process is killed.
    (killed_job, victim), = wait_until(
        lambda: list(Execution.objects.filter(tag="started").values_list("job_id", "worker")[:1]),
        what="a job to start", timeout=60, context=lambda: server.output)
    os.kill(Worker.objects.get(name=victim).pid, signal.SIGKILL)
    wait_until(lambda: not Job.objects.exclude(status=JobStatus.SUCCEEDED).exists(),
               what="every job to succeed", timeout=180, context=lambda: server.output)
    assert executions("finished") == sorted(job.pk for job in jobs), server.output
    lost = [job for job in Job.objects.filter(pk__in=[job.pk for job in jobs])
            if any(entry["type"].endswith("WorkerLost") for entry in job.errors)]
    assert killed_job in {job.pk for job in lost}, server.output
    assert all(entry["interrupted"] for job in lost for entry in job.errors)
    assert answering(server), server.output  # gunicorn replaced the process and serves
    stop(server)


def test_runserver_at_ctrl_c_gives_running_jobs_back_or_leaves_them_to_their_leases(
        start_server, start_worker):
    jobs = [sleep_for.enqueue(600, tag="finished") for _ in range(2)]
    server = start_server("runserver", {"CONCURRENCY": 2})
    wait_until(lambda: Execution.objects.filter(tag="started").count() == 2,
               what="the jobs to start", timeout=60, context=lambda: server.output)
    (embedded,) = Worker.objects.values_list("name", flat=True)
    stop(server)
    # The child gives them back at once; if the reloader's kill, a quarter of a second after
    # Ctrl-C, comes first (a loaded machine), they are still marked running: their leases
    # bring them back, as after any killed worker. Either way none is lost.
    for job in jobs:
        job.refresh_from_db()
        assert (job.status == JobStatus.RUNNING and job.claimed_by == embedded) or (
            (job.status, job.attempts, job.max_attempts, job.interruptions)
            == (JobStatus.QUEUED, 1, 6, 0)), server.output
    worker = start_worker(settings=FAST)  # its maintenance rescues what is left to leases
    wait_until(lambda: not Job.objects.filter(claimed_by=embedded).exists()
               and not Worker.objects.filter(name=embedded).exists(),
               what="every job of the stopped server back in the queue", worker=worker,
               context=lambda: server.output)


def test_off_by_default_the_server_runs_no_worker(start_server):
    job = record.enqueue(tag="never")
    server = start_server("gunicorn-sync", embedded=False)
    wait_until(lambda: answering(server), what="gunicorn to serve", timeout=60)
    for _ in range(5):
        assert answering(server)["unfinished"] == 1
    assert not Worker.objects.exists()
    assert Job.objects.get(pk=job.pk).status == JobStatus.QUEUED
    server.shut_down()
    assert server.wait() == 0, server.output
