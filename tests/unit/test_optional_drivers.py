"""A SQLite-only install has no psycopg: nothing may import it but the code that talks to
PostgreSQL. ``pip install django-sqlqueue`` (no extra) must migrate, enqueue and run jobs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hidden_package import without

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    os.environ.get("SQLQUEUE_TEST_DATABASE", "postgresql") != "sqlite",
    reason="a SQLite-only install; runs in the sqlite pass",
)

WITHOUT_PSYCOPG = without("psycopg", "psycopg_binary", "psycopg_c", "psycopg2") + """
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.models import Job
from tests.testapp.tasks import add

jobs = Job.objects.bulk_enqueue(add.prepare(n, 1) for n in range(2500))  # three batches
done = 0
while claimed := Job.objects.claim(None, "no-psycopg", limit=500):
    done += sum(run_job(job).outcome == "succeeded" for job in claimed)
print(f"ran {done} of {len(jobs)}; psycopg imported: {'psycopg' in sys.modules}")
"""


def test_without_psycopg_every_module_imports_and_jobs_run_on_sqlite(tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    done = subprocess.run([sys.executable, "-c", WITHOUT_PSYCOPG], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ran 2500 of 2500; psycopg imported: False" in done.stdout, done.stdout + done.stderr
