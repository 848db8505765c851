"""Jobs used by the tests. Imported automatically at start-up (an installed app's tasks.py)."""

import threading
import time

from django_sqlqueue import Abort, Reschedule, current_job, job


@job
def add(a, b):
    return a + b


@job(queue="emails", max_attempts=2, retry_backoff=10, retry_min_delay=10)
def send_email(to, subject=""):
    return {"to": to, "subject": subject}


@job
async def async_add(a, b):
    return a + b


@job(max_attempts=3)
def always_fails(message):
    raise RuntimeError(message)


@job
def returns_object():
    return object()


@job
def wants_rescheduling(seconds):
    raise Reschedule(delay=seconds)


@job
def gives_up(reason):
    raise Abort(reason)


@job(name="tests.record")
def record(tag=""):
    """Record this execution, keyed by (job id, attempt), so tests can count runs."""
    from .models import Execution

    job = current_job()
    Execution.objects.create(job_id=job.pk, attempt=job.attempts, worker=job.claimed_by, tag=tag)


@job
async def async_whoami():
    """Return the job it runs as, seen from async code (current_job() crosses asyncio.run)."""
    job = current_job()
    return {"id": job.pk, "attempt": job.attempts}


@job(max_attempts=1)
def raises_keyboard_interrupt():
    """A BaseException that is not an Exception: the job's own failure, never its thread's end."""
    raise KeyboardInterrupt("raised by the job")


@job
def exits(code):
    """Raise SystemExit, which a worker must not swallow as a job failure."""
    raise SystemExit(code)


@job(name="tests.sleep")
def sleep_for(seconds, tag="", gate=None):
    """Record a "started" execution, sleep, then record the execution: a job that is reliably
    "mid-run" for a while. With ``gate`` (a file's path), it is mid-run until that file exists
    (at most two minutes) and then sleeps: a test decides how long, not the machine's speed."""
    import time

    from .models import Execution

    job = current_job()
    Execution.objects.create(job_id=job.pk, attempt=job.attempts, worker=job.claimed_by,
                             tag="started")
    if gate is not None:
        _hold_until(gate, 120)
    time.sleep(seconds)
    Execution.objects.create(job_id=job.pk, attempt=job.attempts, worker=job.claimed_by, tag=tag)


@job(name="tests.async_record")
async def async_record(tag=""):
    """Record an execution through the async ORM."""
    from .models import Execution

    job = current_job()
    await Execution.objects.acreate(job_id=job.pk, attempt=job.attempts, worker=job.claimed_by,
                                    tag=tag)


@job(name="tests.tick_seen")
def tick_seen(label=""):
    """Return the schedule and tick the job was enqueued for (current_job().schedule_*)."""
    job = current_job()
    return {"schedule": job.schedule_name, "tick": job.schedule_tick.isoformat(), "label": label}


def _started():
    from .models import Execution

    job = current_job()
    Execution.objects.create(job_id=job.pk, attempt=job.attempts, worker=job.claimed_by,
                             tag="started")
    return job


@job(name="tests.loop_until_cancelled")
def loop_until_cancelled(seconds=120):
    """A long loop in Python that checks the cooperative flag between steps."""
    import time

    job = _started()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if job.cancel_requested:
            return "stopped early"
        sum(range(1000))  # a step of work
    return "ran to the end"


@job(name="tests.sleep_in_c")
def sleep_in_c(seconds=60):
    """Ignores the cancel: blocked in C code (time.sleep) for the whole time."""
    import time

    _started()
    time.sleep(seconds)


@job(name="tests.async_sleep")
async def async_sleep(seconds=60):
    """An async job awaiting a long sleep: a cancel cancels its task."""
    import asyncio

    from asgiref.sync import sync_to_async

    await sync_to_async(_started)()
    await asyncio.sleep(seconds)


@job(name="tests.timed")
def timed(seconds, tag=""):
    """Record this run's own start and end (tests/process/test_limits_race.py): a Run row
    written when it starts and finished when it ends, around ``seconds`` of sleep."""
    import os
    import time

    from django.utils import timezone

    from .models import Run

    job = current_job()
    run = Run.objects.create(job_id=job.pk, attempt=job.attempts, worker=job.claimed_by,
                             pid=os.getpid(), key=tag, started_at=timezone.now())
    time.sleep(seconds)
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now())


def _hold_until(gate, seconds) -> None:
    """Hold this job's slot until the file ``gate`` exists, at most ``seconds``."""
    import os
    import time

    deadline = time.monotonic() + seconds
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.05)


@job(name="tests.gated")
def gated(gate, tag=""):
    """Hold a slot until the file ``gate`` exists (at most two minutes), then record the
    execution: a test decides when a burst drains, not the machine's speed."""
    from .models import Execution

    _hold_until(gate, 120)
    job = current_job()
    Execution.objects.create(job_id=job.pk, attempt=job.attempts, worker=job.claimed_by, tag=tag)


# The tasks of docs/schedules.md's run-time schedules example (tests/integration/
# test_runtime_schedules.py runs it as written).
@job(name="shop.send_report")
def send_report(customer):
    return customer


@job(name="shop.sync_stock")
def sync_stock(region):
    return region


@job(name="tests.labels", tags=["reports"], metadata={"source": "task"})
def labels():
    """Returns the tags and metadata the running job sees (docs/api.md, Tags and metadata)."""
    job = current_job()
    return {"tags": job.tags, "metadata": job.metadata}


@job(name="tests.enqueue_wave")
def enqueue_wave(keys, per_key, queue="default"):
    """Enqueue ``per_key`` ``add`` jobs for each concurrency key of ``keys`` on ``queue``: new
    work arriving while the job's own key has a backlog (tests/process/test_fairness_workers.py,
    where the backlog's own jobs bring the waves at set points of its progress)."""
    from django_sqlqueue.models import Job

    Job.objects.bulk_enqueue(add.using(queue=queue, concurrency_key=key).prepare(n, n)
                             for key in keys for n in range(per_key))


# ---- async jobs on the worker's event loop (tests/process/test_async_jobs.py) -----------------
# In-process counters: the process tests run ONE worker, so these see every job it runs at once.
_in_flight = {"async": 0, "sync": 0}
_latch = {"open": False}
_sync_lock = threading.Lock()


@job(name="tests.async_nap")
async def async_nap(seconds=0.1, crowd=0, tag=""):
    """Sleep ``seconds`` by awaiting, then record an Execution whose tag is the most async jobs
    this one saw in flight. With ``crowd``: the first jobs wait (up to 10 s) until ``crowd`` are
    in flight at once, which only a worker that runs that many async jobs at once reaches."""
    import asyncio

    from .models import Execution

    _in_flight["async"] += 1  # only the loop's thread touches it
    try:
        seen = _in_flight["async"]
        deadline = time.monotonic() + 10
        while crowd and not _latch["open"] and time.monotonic() < deadline:
            seen = max(seen, _in_flight["async"])
            if seen >= crowd:
                break
            await asyncio.sleep(0.01)
        _latch["open"] = True
        await asyncio.sleep(seconds)
        seen = max(seen, _in_flight["async"])
        this = current_job()
        await Execution.objects.acreate(job_id=this.pk, attempt=this.attempts,
                                        worker=this.claimed_by, tag=tag or str(seen))
    finally:
        _in_flight["async"] -= 1


@job(name="tests.sync_pair")
def sync_pair(wait=2.0):
    """A sync job that waits (up to ``wait`` s) for a second sync job to run beside it, then
    records the most sync jobs it saw running at once (its tag: "sync:N")."""
    from .models import Execution

    with _sync_lock:
        _in_flight["sync"] += 1
        seen = _in_flight["sync"]
    try:
        deadline = time.monotonic() + wait
        while seen < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
            seen = max(seen, _in_flight["sync"])
        this = current_job()
        Execution.objects.create(job_id=this.pk, attempt=this.attempts, worker=this.claimed_by,
                                 tag=f"sync:{max(seen, _in_flight['sync'])}")
    finally:
        with _sync_lock:
            _in_flight["sync"] -= 1


@job(name="tests.async_sleeps_then_records")
async def async_sleeps_then_records(seconds=60):
    """Records "started", awaits ``seconds``; a cancel or time limit ends it at that await (it
    then records "cancelled" from its CancelledError handler, and re-raises)."""
    import asyncio

    from .models import Execution

    this = current_job()
    await Execution.objects.acreate(job_id=this.pk, attempt=this.attempts,
                                    worker=this.claimed_by, tag="started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        await Execution.objects.acreate(job_id=this.pk, attempt=this.attempts,
                                        worker=this.claimed_by, tag="cancelled")
        raise
    return "slept"


@job(name="tests.async_blocks_loop")
async def async_blocks_loop(seconds=2.0):
    """Blocks the event loop: a synchronous sleep in an async job."""
    time.sleep(seconds)
    return "blocked"


@job(name="tests.flow_step")
def flow_step(*received, tag="", expect=None, fail=False, sleep_ms=0, gate=None):
    """A workflow's step (tests/integration/test_workflows.py, tests/process/test_workflow_race.py,
    tests/chaos/test_workflow_kills.py): records its run (a Run row, as ``timed``), fails with
    ``fail``, checks what it received from its parents against ``expect`` (an Abort if it
    differs), holds its slot until the file ``gate`` exists (at most ten minutes), sleeps
    ``sleep_ms`` and returns its ``tag``."""
    import os
    import time

    from django.utils import timezone

    from .models import Run

    job = current_job()
    run = Run.objects.create(job_id=job.pk, attempt=job.attempts, worker=job.claimed_by or "",
                             pid=os.getpid(), key=tag[:100], started_at=timezone.now())
    if fail:
        raise RuntimeError(f"{tag} fails")
    if expect is not None and list(received) != expect:
        raise Abort(f"{tag} received {list(received)!r}, expected {expect!r}")
    if gate:
        _hold_until(gate, 600)
    time.sleep(sleep_ms / 1000)
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now())
    return tag


@job
def takes_anything(*args, **kwargs):
    """Any arguments: for tests of the payload itself (enqueue binds a call to its function)."""
    return {"args": list(args), "kwargs": kwargs}


@job(name="tests.progress_burst")
def progress_burst(reports, gate=None, total=None):
    """Report progress at least ``reports`` times in a tight loop, and until the file ``gate``
    exists (at most two minutes; tests/process/test_progress_worker.py): returns how many
    reports it made, for how long, and how many progress UPDATEs this process ran meanwhile
    (the final one, written after the function returns, not counted)."""
    import os
    import time

    from django_sqlqueue.run.progress import board, report_progress

    total = total or reports
    statements, started = board.statements, time.monotonic()
    made = 0
    while made < reports or (gate and not os.path.exists(gate)
                             and time.monotonic() - started < 120):
        made += 1
        report_progress(min(made, total), total, f"step {made}")
    return {"reports": made, "seconds": time.monotonic() - started,
            "statements": board.statements - statements}


@job(name="tests.async_progress")
async def async_progress(reports):
    from django_sqlqueue import report_progress

    for done in range(1, reports + 1):
        report_progress(done, reports, "async")
    return reports


# The task of docs/waiting.md's views (tests/process/test_waiting.py runs them as written).
@job(name="shop.render_invoice")
def render_invoice(order_id):
    return f"/invoices/{order_id}.pdf"


# Interruptions, counted or not (tests/process/test_outage_interruptions.py).
@job(name="tests.query_until")
def query_until(tag):
    """Records its start, then reads the database every 0.1 s until an Execution tagged ``tag``
    exists: a database stopped meanwhile cuts it short."""
    from .models import Execution

    this = current_job()
    Execution.objects.create(job_id=this.pk, attempt=this.attempts, worker="", tag="started")
    while not Execution.objects.filter(tag=tag).exists():
        time.sleep(0.1)
    return tag


@job(name="tests.lose_own_connection")
def lose_own_connection():
    """The server ends this job's connection, and keeps answering; then the job reads."""
    from tests.support.server_side import end_connection

    from .models import Execution

    end_connection(current_job()._state.db or "default")
    return Execution.objects.count()  # fails: its connection is gone


@job(name="tests.leave_a_lock_held")
def leave_a_lock_held():
    """Leaves a thread behind that locks a row of its own (an Execution tagged "held") in a
    transaction it never ends, as a worker's thread caught mid-transaction when its process is
    replaced; once the lock is held, records "locked" and returns."""
    import threading

    from django.db import transaction

    from .models import Execution

    this = current_job()
    row = Execution.objects.create(job_id=this.pk, attempt=this.attempts, worker="", tag="held")
    held = threading.Event()

    def hold():
        with transaction.atomic():
            Execution.objects.select_for_update().get(pk=row.pk)
            held.set()
            time.sleep(3600)

    threading.Thread(target=hold, daemon=True).start()
    if held.wait(60):
        Execution.objects.create(job_id=this.pk, attempt=this.attempts, worker="", tag="locked")


@job(name="tests.outlast_a_restart")
def outlast_a_restart():
    """Records its start and sleeps in a statement on the server, until the server goes away
    under it; then, before raising that error, waits until the database answers again (as an
    error handler that takes its time would): by the time the worker looks, the server is
    back."""
    from django.db import OperationalError, connections

    from tests.support.server_side import sleep_on_server
    from tests.support.waiting import wait_until

    from .models import Execution

    this = current_job()
    Execution.objects.create(job_id=this.pk, attempt=this.attempts, worker="", tag="started")
    try:
        sleep_on_server(600)  # the test restarts the server meanwhile
    except OperationalError:
        connections.close_all()
        wait_until(lambda: Execution.objects.exists(), what="the database to answer again",
                   timeout=120)
        raise
    return "slept"


from . import step_tasks  # noqa: E402, F401 - the durable-step tests' jobs, registered with these
