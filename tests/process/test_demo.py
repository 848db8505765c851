"""The example project's ``manage.py demo`` works on a fresh database (what scripts/demo.sh runs):
it enqueues its jobs and has them run by a ``manage.py runworker --burst`` subprocess.

It runs as real subprocesses with the example project's settings, against a new SQLite file, so it
needs no test database and runs once, in the SQLite pass.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE_PROJECT = Path(__file__).resolve().parents[2] / "example_project"

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
    # The jobs were run by a real `runworker --burst` subprocess, whose output the demo relays.
    banner = next((line for line in output.splitlines() if "django-sqlqueue" in line), "")
    assert "worker" in banner, output
    assert "burst: nothing left to do" in output
    # The demo enqueues 10 jobs; retries and a reschedule make 15 attempts. Both are said.
    assert ("stopped after 15 attempt(s): 10 job(s) finished (9 succeeded, 1 exhausted), "
            "4 failed attempt(s) to retry, 1 rescheduled") in output
    assert "job finished task=shop.tasks.charge_card" in output  # the worker's per-job lines
