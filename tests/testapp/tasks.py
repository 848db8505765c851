"""Jobs used by the tests. Imported automatically at start-up (an installed app's tasks.py)."""

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
def sleep_for(seconds, tag=""):
    """Sleep, then record the execution: a job that is reliably "mid-run" for a while."""
    import time

    from .models import Execution

    job = current_job()
    Execution.objects.create(job_id=job.pk, attempt=job.attempts, worker=job.claimed_by,
                             tag="started")
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


@job
def takes_anything(*args, **kwargs):
    """Any arguments: for tests of the payload itself (enqueue binds a call to its function)."""
    return {"args": list(args), "kwargs": kwargs}
