"""Jobs of the durable-step tests (tests/integration/test_steps.py and the process tests
tests/process/test_steps_kills.py).

Each step's function leaves two traces: a marker file per execution in ``marker_dir``, written
outside any transaction (how often the function ran), and, for steps that write to the jobs'
database, a row in its transaction (how often its effect happened). The tests count both.
"""

import copy
import os
import random
import threading
import time
import uuid
from pathlib import Path

from django_sqlqueue import astep, current_job, job, step, step_key

#: The longest a gated step waits for its gate: far beyond any test's need.
GATE_SECONDS = 600


def mark(marker_dir, label) -> None:
    """One file per execution: ``{label}.{uuid}`` (counted by tests/process/test_steps_kills)."""
    Path(marker_dir, f"{label}.{uuid.uuid4().hex}").touch()


def executions(marker_dir, label) -> int:
    return len(list(Path(marker_dir).glob(f"{label}.*")))


def wait_for_gate(marker_dir) -> None:
    """Wait until the test creates the file ``gate`` in ``marker_dir`` (by construction: the
    test opens it once it has done what had to happen meanwhile)."""
    deadline = time.monotonic() + GATE_SECONDS
    while not Path(marker_dir, "gate").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _part(n, marker_dir, gate, hold_ms=0):
    """Step ``n`` of ``five_steps``: marks its execution, writes an Execution row (tag
    ``step{n}``) in the step's transaction and holds it up to ``hold_ms`` (``insert_row``),
    waits for the gate at step four, returns ``10 * n``."""
    from .jobs import insert_row

    mark(marker_dir, f"step{n}")
    insert_row(f"step{n}", hold_ms)
    if n == 4 and gate:
        wait_for_gate(marker_dir)
    return 10 * n


@job(name="tests.five_steps")
def five_steps(marker_dir, gate=False, fail_after=0):
    """Five steps; the fourth waits for a file ``gate`` in ``marker_dir`` (with ``gate``), and
    the job fails after its step ``fail_after`` in its first attempt."""
    results = []
    for n in range(1, 6):
        results.append(step(f"step{n}", _part, n, marker_dir, gate))
        if n == fail_after and current_job().attempts == 1:
            raise RuntimeError(f"planned failure after step {n}")
    return results


def _write_order(key, marker_dir, hold_ms):
    """A step that writes a row to the jobs' database and holds its transaction a little, so
    that kills land inside it as well as before and after it."""
    from .models import Order

    mark(marker_dir, f"order-{key}")
    Order.objects.create(total=key)
    time.sleep(random.uniform(0, hold_ms) / 1000)
    return key


@job(name="tests.step_writes_order")
def step_writes_order(key, marker_dir, hold_ms=0, pause_ms=0):
    """One atomic step that creates ``Order(total=key)``, with random pauses around it."""
    time.sleep(random.uniform(0, pause_ms) / 1000)
    result = step("order", _write_order, key, marker_dir, hold_ms)
    time.sleep(random.uniform(0, pause_ms) / 1000)
    return result


@job(name="tests.raced_step")
def raced_step(marker_dir):
    """A step whose first execution is overtaken: while its function runs, another run of the
    same job (another thread and connection, as a rescued run on another worker) runs and
    records the step; only then does the first write its row and try to record its result."""
    return step("order", _overtaken, marker_dir)


def _overtaken(marker_dir):
    from django.db import connections

    from django_sqlqueue.run.runner import run

    from .models import Order

    first = executions(marker_dir, "raced") == 0
    mark(marker_dir, "raced")
    if first:
        # No read of the database in this step's transaction (SQLite could not write after a
        # read older than the other run's commit): the other run gets a copy of the job.
        other = copy.copy(current_job())

        def rescued_run():
            try:
                run(other)
            finally:
                connections.close_all()

        thread = threading.Thread(target=rescued_run)
        thread.start()
        thread.join()
    Order.objects.create(total=1 if first else 2)
    return "first" if first else "second"


@job(name="tests.step_fails")
def step_fails(marker_dir):
    """An atomic step that writes a row and then raises: its row must roll back."""
    return step("fails", _write_then_raise, marker_dir)


def _write_then_raise(marker_dir):
    from .models import Order

    mark(marker_dir, "fails")
    Order.objects.create(total=7)
    raise RuntimeError("the step fails after its write")


@job(name="tests.step_misuse")
def step_misuse(kind):
    """Misused steps: ``duplicate`` names, a ``not_json`` result."""
    if kind == "duplicate":
        step("same", int, 1)
        step("same", int, 2)
    if kind == "not_json":
        step("bad", object)


@job(name="tests.step_tried_again")
def step_tried_again(marker_dir):
    """A step that fails once is tried again under its name in the same run."""
    for _ in range(2):
        try:
            return step("flaky", _fails_first, marker_dir)
        except ConnectionError:
            continue
    return None


def _fails_first(marker_dir):
    from .models import Order

    Order.objects.create(total=executions(marker_dir, "flaky"))
    mark(marker_dir, "flaky")
    if executions(marker_dir, "flaky") == 1:
        raise ConnectionError("the first try fails")
    return "second try"


@job(name="tests.step_outside_atomic")
def step_outside_atomic(marker_dir):
    """A step that is not atomic, and its idempotency key."""
    return step("external", lambda: (mark(marker_dir, "external"), step_key("external"))[1],
                atomic=False)


@job(name="tests.async_steps")
async def async_steps(marker_dir):
    """An async job's steps: an async function, and a sync one that writes atomically."""
    async def fetch():
        mark(marker_dir, "fetch")
        return {"price": 12}

    price = await astep("fetch", fetch)
    total = await astep("save", _write_order, price["price"], marker_dir, 0, atomic=True)
    return [price, total]


def _frozen_write(marker_dir):
    """The first execution waits for the gate before it writes (the test freezes its worker
    meanwhile); any later one writes at once. Returns the pid of the process that ran it."""
    from .models import Order

    first = executions(marker_dir, "frozen") == 0
    mark(marker_dir, "frozen")
    if first:
        wait_for_gate(marker_dir)
    Order.objects.create(total=os.getpid())
    return os.getpid()


@job(name="tests.frozen_step")
def frozen_step(marker_dir):
    """One atomic step, then a marker naming the result the step returned in this run."""
    result = step("order", _frozen_write, marker_dir)
    mark(marker_dir, f"after-{result}")
    return [result, os.getpid()]
