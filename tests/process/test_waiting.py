"""Waiting for a job (docs/waiting.md) against real ``runworker`` processes: a waiter returns
the job once a worker has finished it, times out while nobody runs it, returns at once for a job
that already ended; the same for a workflow's callback and for the async twin. On PostgreSQL the
waiter is woken by the NOTIFY of the outcome write: with its poll longer than the test's
timeout, only that NOTIFY can wake it.

Each job finishes only after the test lets it (a worker started later, or the ``gated`` task's
gate file): the waiter is waiting by then, by construction, not by timing."""

import threading

import pytest
from asgiref.sync import async_to_sync
from django.db import connections
from django.test import override_settings

from django_sqlqueue.db.base import FINISHED_CHANNEL
from django_sqlqueue.exceptions import WaitTimeout
from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.waiting import listener, waiter
from django_sqlqueue.workflows import chord, group
from tests.support.waiting import wait_until
from tests.testapp.jobs import insert_once
from tests.testapp.tasks import add, always_fails, flow_step, gated

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]
FAST = {"POLL_INTERVAL_SECONDS": 0.2}
#: Longer than any wait of these tests: a waiter under it is woken by NOTIFY or not at all.
NO_POLL = {"WAIT_POLL_MIN_SECONDS": 600, "WAIT_POLL_MAX_SECONDS": 600}


@pytest.fixture(autouse=True)
def _listeners_closed():
    """The waiters' LISTEN connection would keep the test database from being dropped."""
    yield
    listener.stop_all()


class Waiter(threading.Thread):
    """``call()`` on a thread of its own (with its own database connection): its return
    value or exception, once joined."""

    def __init__(self, call):
        super().__init__(daemon=True)
        self.call, self.value, self.error = call, None, None
        self.start()

    def run(self):
        try:
            self.value = self.call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc
        finally:
            connections.close_all()

    def result(self, timeout=240):
        self.join(timeout)
        assert not self.is_alive(), "the waiter never returned"
        if self.error is not None:
            raise self.error
        return self.value


def test_wait_returns_the_job_a_worker_finished(start_worker):
    job = add.enqueue(2, 3)
    waiting = Waiter(lambda: Job.objects.get(pk=job.pk).wait_finished(timeout=120))
    worker = start_worker(settings=FAST)
    finished = waiting.result()
    assert (finished.status, finished.result) == (JobStatus.SUCCEEDED, 5), worker.output
    assert finished.finished_at is not None


def test_a_job_that_failed_for_good_is_returned_with_its_status(start_worker):
    job = always_fails.using(max_attempts=1).enqueue("boom")
    waiting = Waiter(lambda: Job.objects.get(pk=job.pk).wait_finished(timeout=120))
    start_worker(settings=FAST)
    finished = waiting.result()
    assert finished.status == JobStatus.EXHAUSTED
    assert finished.errors[-1]["message"] == "boom"


def test_a_cancelled_queued_job_ends_the_wait():
    """A cancel of a queued job sends no NOTIFY: the waiter's poll sees it."""
    job = add.enqueue(1, 1)
    waiting = Waiter(lambda: Job.objects.get(pk=job.pk).wait_finished(timeout=120))
    assert job.cancel()
    assert waiting.result().status == JobStatus.CANCELLED


def test_the_timeout_raises_while_nobody_runs_the_job():
    job = add.enqueue(1, 2)
    with pytest.raises(WaitTimeout, match=rf"job {job.pk} did not finish within 0.3s"):
        job.wait_finished(timeout=0.3)
    assert Job.objects.get(pk=job.pk).status == JobStatus.QUEUED


def test_a_finished_job_returns_at_once():
    job = add.enqueue(4, 4)
    (claimed,) = Job.objects.claim(worker_id="test")
    assert claimed.complete(8)
    finished = Job.objects.get(pk=job.pk).wait_finished(timeout=0)  # 0: only look
    assert (finished.status, finished.result) == (JobStatus.SUCCEEDED, 8)


def test_bad_timeouts_are_refused_with_the_fix():
    job = add.enqueue(1, 2)
    with pytest.raises(ValueError, match="0 or more seconds"):
        job.wait_finished(timeout=-1)
    with pytest.raises(TypeError, match="number of seconds, or None"):
        job.wait_finished(timeout="10")


def test_waiting_inside_a_transaction_is_refused():
    from django.db import transaction

    job = add.enqueue(1, 2)
    with transaction.atomic(), pytest.raises(RuntimeError, match="after the commit"):
        job.wait_finished(timeout=1)


def test_a_workflows_wait_returns_its_callback(start_worker):
    flow = chord(group(flow_step.s(tag=f"part{n}") for n in range(3)),
                 flow_step.s(tag="callback", expect=[["part0", "part1", "part2"]])).enqueue()
    waiting = Waiter(lambda: flow.wait_finished(timeout=120))
    worker = start_worker(settings=FAST)
    (callback,) = waiting.result()
    assert callback.pk == flow.jobs[-1].pk
    assert (callback.status, callback.result) == (JobStatus.SUCCEEDED, "callback"), (
        worker.output)


def test_await_finished_leaves_the_event_loop_free(start_worker, tmp_path):
    """The job runs only once a coroutine beside the waiter opens its gate: were the loop
    blocked by the wait, the gate would stay shut and the wait would time out."""
    import asyncio

    gate = tmp_path / "gate"
    job = gated.enqueue(str(gate))
    start_worker(settings=FAST)

    async def open_gate():
        await asyncio.sleep(0.2)
        gate.touch()

    async def main():
        opener = asyncio.ensure_future(open_gate())
        row = await Job.objects.aget(pk=job.pk)
        finished = await row.await_finished(timeout=120)
        await opener
        return finished

    assert async_to_sync(main)().status == JobStatus.SUCCEEDED


def test_a_workflows_async_wait(start_worker):
    flow = chord(group(flow_step.s(tag="a"), flow_step.s(tag="b")),
                 flow_step.s(tag="end")).enqueue()
    start_worker(settings=FAST)
    (callback,) = async_to_sync(flow.await_finished)(timeout=120)
    assert (callback.status, callback.result) == (JobStatus.SUCCEEDED, "end")


def test_postgresql_wakes_the_waiter_by_notify(start_worker, tmp_path, monkeypatch):
    """Its poll is longer than the wait: it returns because the outcome write, which sees
    the job awaited, sent its id, which the process's listener received."""
    gate, job, worker, shared, heard = _gated_job_and_listener(start_worker, tmp_path,
                                                               monkeypatch)
    wait_until(lambda: Job.objects.get(pk=job.pk).status == JobStatus.RUNNING,
               what="the job to start", worker=worker)
    with override_settings(SQLQUEUE={**_sqlqueue(), **NO_POLL}):
        waiting = Waiter(lambda: Job.objects.get(pk=job.pk).wait_finished(timeout=120))
        wait_until(lambda: shared.listening and Job.objects.get(pk=job.pk).awaited,
                   what="the waiter to listen and mark its job", worker=worker)
        gate.touch()
        finished = waiting.result()
    assert finished.status == JobStatus.SUCCEEDED
    assert str(job.pk) in heard


def test_the_listener_reconnects_after_its_connection_is_killed(start_worker, tmp_path,
                                                                monkeypatch):
    """Its backend terminated while a waiter waits (with no poll to fall back on): the listener
    connects and LISTENs again, and the job's NOTIFY still wakes the waiter."""
    gate, job, worker, shared, heard = _gated_job_and_listener(start_worker, tmp_path,
                                                               monkeypatch)
    wait_until(lambda: Job.objects.get(pk=job.pk).status == JobStatus.RUNNING,
               what="the job to start", worker=worker)  # marked only once no claim can take it
    with override_settings(SQLQUEUE={**_sqlqueue(), **NO_POLL}):
        waiting = Waiter(lambda: Job.objects.get(pk=job.pk).wait_finished(timeout=120))
        wait_until(lambda: shared.listening and Job.objects.get(pk=job.pk).awaited
                   and _listen_pids(), what="the waiter to listen and mark its job")
        (killed,) = _listen_pids()
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [killed])
        wait_until(lambda: shared.listening and _listen_pids() not in ([], [killed]),
                   what="the listener to LISTEN again on a new connection", worker=worker)
        gate.touch()
        assert waiting.result().status == JobStatus.SUCCEEDED
    assert str(job.pk) in heard  # woken by the NOTIFY, not by its deadline's last look


def test_the_transactional_lane_wakes_the_waiter_by_notify(start_worker, monkeypatch):
    """A transactional job run by a worker's lane (its outcome written by the fenced outcome
    write inside the lane's transaction) sends its NOTIFY at the lane's commit."""
    shared = waiter.listener_for("default")
    if shared is None:
        pytest.skip("no NOTIFY on this database: waiters poll")
    job = insert_once.enqueue("waited")
    # A lane runs a job while its row still says queued, so a waiter never marks it (a ready
    # job is polled, not marked: waiting/waiter.py); one marked earlier, as a workflow's job is
    # while it waits for its parents, is announced by the lane's outcome write, at its commit.
    Job.objects.filter(pk=job.pk).update(awaited=True)
    heard = _notifications(shared, monkeypatch)
    with override_settings(SQLQUEUE={**_sqlqueue(), **NO_POLL}):
        waiting = Waiter(lambda: Job.objects.get(pk=job.pk).wait_finished(timeout=120))
        wait_until(lambda: shared.listening, what="the waiter to listen")
        worker = start_worker("--transactional-batch", "5", settings=FAST)
        assert waiting.result().status == JobStatus.SUCCEEDED, worker.output
    assert str(job.pk) in heard


def _gated_job_and_listener(start_worker, tmp_path, monkeypatch) -> tuple:
    """A job held by its gate file, a worker to run it, this process's listener, and the
    notifications it receives from now on; skipped where waiters cannot LISTEN."""
    shared = waiter.listener_for("default")
    if shared is None:
        pytest.skip("no NOTIFY on this database: waiters poll")
    gate = tmp_path / "gate"
    job = gated.enqueue(str(gate))
    worker = start_worker(settings=FAST)
    return gate, job, worker, shared, _notifications(shared, monkeypatch)


def _notifications(shared, monkeypatch) -> list:
    """The payloads ``shared`` receives from now on (the test's end restores it)."""
    heard = []
    received = shared.woken
    monkeypatch.setattr(shared, "woken",
                        lambda payload: (heard.append(payload), received(payload)))
    return heard


def _listen_pids() -> list:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE query = %s",
                       [f'LISTEN "{FINISHED_CHANNEL}"'])
        return [pid for (pid,) in cursor.fetchall()]


def test_many_waiters_share_one_listen_connection(start_worker, tmp_path):
    """Twelve requests waiting at once: one LISTEN connection for the process (PostgreSQL;
    elsewhere they poll), and each is woken for its own job."""
    gate = tmp_path / "gate"
    jobs = [gated.enqueue(str(gate), tag=str(n)) for n in range(12)]
    notify = waiter.listener_for("default") is not None
    worker = start_worker("--concurrency", "12", settings=FAST)
    # All running (held by the gate): a waiter marks a job only once no claim can take it.
    wait_until(lambda: Job.objects.filter(status=JobStatus.RUNNING).count() == len(jobs),
               what="the 12 jobs to start", worker=worker)
    with override_settings(SQLQUEUE={**_sqlqueue(), **(NO_POLL if notify else {})}):
        waiting = [Waiter(lambda pk=job.pk: Job.objects.get(pk=pk).wait_finished(timeout=120))
                   for job in jobs]
        if notify:
            shared = waiter.listener_for("default")
            wait_until(lambda: shared.listening
                       and Job.objects.filter(awaited=True).count() == len(jobs),
                       what="every waiter to mark its job, and the listener to listen")
            assert len(_listen_pids()) == 1
        gate.touch()
        finished = [each.result() for each in waiting]
    assert [(job.pk, job.status) for job in finished] == [
        (job.pk, JobStatus.SUCCEEDED) for job in jobs]


def _sqlqueue():
    from django.conf import settings

    return dict(settings.SQLQUEUE)


# ---- the views of docs/waiting.md, as written -------------------------------------------------
def _docs_views(timeout: float = 5) -> dict:
    """The views of the page; ``timeout`` stands for their 5 s wait (the views' answer with a worker
    must not depend on how fast a loaded machine starts one)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "waiting.md").read_text()
    section = text.split("## In a view", 1)[1].split("\n## ", 1)[0]
    code = "\n".join(re.findall(r"```python\n(.*?)```", section, re.S)).replace(
        "from .jobs import", "from tests.testapp.tasks import")
    assert code.count("timeout=5)") == 2, "the page's views changed: update this test"
    code = code.replace("timeout=5)", f"timeout={timeout})")
    namespace = {}
    exec(code, namespace)  # noqa: S102 - the documentation's own code
    return namespace


def test_the_docs_views_answer_with_the_result(start_worker):
    import json

    from django.test import RequestFactory

    views = _docs_views(timeout=120)
    start_worker(settings=FAST)
    request = RequestFactory().get("/invoice")
    answer = views["invoice"](request, 7)
    assert answer.status_code == 200
    assert json.loads(answer.content)["url"] == "/invoices/7.pdf"
    answer = async_to_sync(views["invoice_async"])(request, 8)
    assert answer.status_code == 200
    assert json.loads(answer.content)["url"] == "/invoices/8.pdf"


def test_the_docs_view_answers_pending_past_its_timeout():
    from django.test import RequestFactory

    answer = _docs_views(timeout=1)["invoice"](RequestFactory().get("/invoice"), 9)  # no worker
    assert answer.status_code == 202
    assert Job.objects.get().status == JobStatus.QUEUED
