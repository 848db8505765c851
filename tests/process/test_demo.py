"""The example project's ``manage.py demo`` works on a fresh database (what scripts/demo.sh runs):
it enqueues its jobs and has them run by a ``manage.py runworker --burst`` subprocess.

It runs as real subprocesses with the example project's settings, against a new SQLite file, so it
needs no test database and runs once, in the SQLite pass.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_PROJECT = ROOT / "example_project"

pytestmark = pytest.mark.skipif(
    os.environ.get("SQLQUEUE_TEST_DATABASE", "postgresql") != "sqlite",
    reason="the demo runs in the sqlite pass",
)


def manage(*args, env):
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=EXAMPLE_PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_runs_on_a_fresh_database(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        # This checkout's package, whatever is installed (an editable install of another one).
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    migrate = manage("migrate", "--noinput", env=env)
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr

    demo = manage("demo", env=env)
    output = demo.stdout + demo.stderr
    assert demo.returncode == 0, output
    assert "succeeded" in output
    assert "exhausted" in output
    assert "charge_card" in output and "succeeded on attempt 3" in output
    assert "sync_inventory" in output and "exhausted its 3 attempts" in output
    assert "Demo finished: every job ended as expected." in output
    # Mail is one line a message, not headers and bodies burying the story; the end points at
    # the admin and stats.
    assert "Content-Type:" not in output and "MIME-Version:" not in output
    assert re.search(r"\[mail\] to \S+@\S+: Your receipt", output), output
    assert output.rstrip().endswith("or in this terminal: ../.venv/bin/python manage.py stats")
    assert "http://127.0.0.1:8000/admin/django_sqlqueue/" in output
    # The jobs were run by a real `runworker --burst` subprocess, whose output the demo relays.
    banner = next((line for line in output.splitlines() if "django-sqlqueue" in line), "")
    assert "worker" in banner, output
    assert "burst: nothing left to do" in output
    # The schedule ticked every 2 s while the worker ran: one job per tick, which it ran.
    fired = re.search(r"stock-check \(every 2 s\) fired .* while the worker ran: ticks (.*), one "
                      r"job each, enqueued by (\S+); (\d+) ran", output)
    assert fired, output
    ticks, ran = fired[1].split(", "), int(fired[3])
    assert 1 <= ran <= len(ticks) and fired[2].startswith(f"{os.uname().nodename}:")
    assert re.search(r"\nstock-check +active +Every 2 seconds", output)  # manage.py schedules
    # The demo enqueues 10 jobs; retries and a reschedule make 15 attempts, plus one per tick
    # run. Both are said.
    assert (f"stopped after {15 + ran} attempt(s): {10 + ran} job(s) finished ({9 + ran} "
            "succeeded, 1 exhausted), 4 failed attempt(s) to retry, 1 rescheduled") in output
    assert "job finished task=shop.tasks.charge_card" in output  # the worker's per-job lines
