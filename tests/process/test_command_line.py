"""What a user sees at the command line when something is wrong: one clear line, no traceback."""

import datetime as dt
import json
import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.statuses import JobStatus
from tests.process.conftest import ROOT
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db(transaction=True)


def manage(*args, db_url, sqlqueue=None):
    """``python -m django ARGS`` with the test settings and ``SQLQUEUE`` as given."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": db_url(),
           "SQLQUEUE_TEST_SETTINGS": json.dumps(sqlqueue or {})}
    return subprocess.run([sys.executable, "-m", "django", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [["check"], ["runworker", "--burst"]])
@pytest.mark.parametrize(
    "sqlqueue, line",
    [
        ({"MAX_ATTEMPT": 3}, "settings.SQLQUEUE has unknown key(s) 'MAX_ATTEMPT' (did you mean "
                             "'MAX_ATTEMPTS'?); the valid keys are ASYNC_BLOCK_WARNING_SECONDS, "),
        ({"LEASE_SECONDS": "30"}, "settings.SQLQUEUE['LEASE_SECONDS'] must be int or float, "
                                  "not str."),
        ({"MAX_ATTEMPTS": 0}, "settings.SQLQUEUE: MAX_ATTEMPTS must be at least 1."),
    ],
)
def test_a_bad_setting_is_one_check_line_and_stops_the_worker(db_url, command, sqlqueue, line):
    # The test app's tasks.py registers @job functions at start-up: a bad setting must not turn
    # that import into a traceback.
    done = manage(*command, db_url=db_url, sqlqueue=sqlqueue)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Traceback" not in output, output
    [reported] = [text for text in output.splitlines() if "sqlqueue.E001" in text]
    assert reported.startswith("?: (sqlqueue.E001) ") and line in reported, output


def test_purgejobs_shows_a_few_percentage_steps_not_a_line_per_batch():
    finished = timezone.now() - dt.timedelta(days=30)
    Job.objects.bulk_create(
        Job(task_name="tests.record", queue="reports", status=JobStatus.SUCCEEDED,
            finished_at=finished, payload={"args": [], "kwargs": {}})
        for _ in range(5000)
    )
    out = StringIO()  # not a terminal: a log or a cron mail
    call_command("purgejobs", "--older-than", "7d", "-q", "reports", "-s", "succeeded",
                 "--noinput", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("will delete 5000 job(s) finished before")
    assert lines[1:] == [
        "  queue reports: succeeded 5000",
        "  deleted 2000/5000 job(s) (40%)",
        "  deleted 3000/5000 job(s) (60%)",
        "  deleted 4000/5000 job(s) (80%)",
        "deleted 5000 job(s)",
    ]
    assert not Job.objects.exists()


@pytest.fixture
def pids_limit():
    """A cgroup (v1 pids controller) that allows 40 tasks: a container's pids limit."""
    group = Path("/sys/fs/cgroup/pids") / f"sqlqueue-test-{os.getpid()}"
    try:
        group.mkdir()
        (group / "pids.max").write_text("40")
    except OSError as exc:
        pytest.skip(f"needs root and the cgroup pids controller to limit threads: {exc}")
    yield group
    group.rmdir()


def test_a_worker_the_system_refuses_threads_stops_before_it_claims(db_url, pids_limit):
    job = add.enqueue(1, 2)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": db_url()}
    # The worker joins the cgroup, then asks for 256 job threads.
    command = (f'echo $$ > {pids_limit / "cgroup.procs"} && exec "$0" -m django runworker '
               "--burst --concurrency 256")
    done = subprocess.run(["sh", "-c", command, sys.executable], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "CommandError: could only start " in output and " of 256 job threads" in output
    assert "lower --concurrency" in output and "Traceback" not in output
    assert not Worker.objects.exists()  # it never registered
    assert Job.objects.get(pk=job.pk).status == JobStatus.QUEUED  # nor claimed anything


@pytest.fixture
def unmigrated_jobs_database():
    """The "jobs" database as after a forgotten ``migrate``: no tables of the queue (the suite's
    router keeps them out of it) and none of its migrations recorded."""
    call_command("migrate", "django_sqlqueue", "zero", fake=True, database="jobs", verbosity=0)
    yield
    call_command("migrate", "django_sqlqueue", fake=True, database="jobs", verbosity=0)


@pytest.mark.django_db(transaction=True, databases=["default", "jobs"])
def test_a_worker_on_an_unmigrated_database_says_to_migrate_and_exits(
    db_url, unmigrated_jobs_database
):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": db_url(),
           "SQLQUEUE_TEST_JOBS_DATABASE": "1", "JOBS_DATABASE_URL": db_url("jobs")}
    # Not --burst: a worker that retried the missing table would never exit (timeout: failed).
    done = subprocess.run([sys.executable, "-m", "django", "runworker"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output, output
    [line] = output.strip().splitlines()
    assert re.fullmatch(
        r"CommandError: The jobs database 'jobs' lacks \d+ of django_sqlqueue's migrations "
        r"\(0001_initial to 0\d+_\w+\): run `python manage.py migrate --database jobs` first\.",
        line), line
    # And `manage.py check --deploy --database` warns of the same; migrate, which runs the
    # database checks first, does not tell its user to run it.
    done = subprocess.run(
        [sys.executable, "-m", "django", "check", "--deploy", "--database", "jobs"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert "(sqlqueue.W002) the jobs database 'jobs' lacks " in done.stderr, done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "django", "migrate", "django_sqlqueue", "--database", "jobs",
         "--fake"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "sqlqueue.W002" not in done.stdout + done.stderr, (
        done.stdout + done.stderr)
