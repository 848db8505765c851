"""A job's progress where operators look: the admin's job page and ``manage.py stats --job``
show the latest value the job reported, as the worker's flush wrote it (run/progress.py)."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from django_sqlqueue import report_progress
from django_sqlqueue.context import _current_job
from django_sqlqueue.run.progress import board
from tests.factories import JobFactory, claimed_job

pytestmark = pytest.mark.django_db


def reported(job, *reports):
    """Report as the job's code does, then flush as the worker's progress thread does."""
    token = _current_job.set(job)
    try:
        for report in reports:
            report_progress(*report)
    finally:
        _current_job.reset(token)
    board.flush()


def stats(*args) -> str:
    out = StringIO()
    call_command("stats", *args, stdout=out)
    return out.getvalue()


def test_the_job_page_shows_the_latest_progress_as_a_bar(admin_client):
    job = claimed_job()
    reported(job, *((done, 4_000, f"row {done} <b>") for done in range(1, 3_001)))
    html = admin_client.get(reverse("admin:django_sqlqueue_job_change", args=[job.pk])) \
        .content.decode()
    assert '<progress class="sq-progress" value="3000" max="4000"></progress>' in html
    assert "3,000 of 4,000 (75%)" in html
    assert "row 3000 &lt;b&gt;" in html and "row 2999" not in html  # the latest, escaped


def test_a_job_without_a_total_or_without_progress(admin_client):
    job = claimed_job()
    reported(job, (12, None, ""))
    html = admin_client.get(reverse("admin:django_sqlqueue_job_change", args=[job.pk])) \
        .content.decode()
    assert "12 done" in html and "<progress" not in html
    html = admin_client.get(reverse("admin:django_sqlqueue_job_change",
                                    args=[JobFactory().pk])).content.decode()
    # No progress reported: no progress row at all (it said "None").
    assert "field-progress_bar" not in html and "<progress" not in html


def test_stats_shows_one_jobs_latest_progress():
    job = claimed_job()
    reported(job, (1, 8, "first"), (6, 8, "sixth"))
    line = stats("--job", str(job.pk))
    assert line.startswith(f"job {job.pk} tests.testapp.tasks.add running: 6 of 8 (75%), "
                           "'sixth', ")
    assert line.rstrip().endswith(" ago")
    document = json.loads(stats("--job", str(job.pk), "--json"))
    assert document["status"] == "running" and document["progress"]["done"] == 6
    assert document["progress"]["fraction"] == 0.75 and document["progress"]["message"] == "sixth"


def test_stats_of_a_job_that_never_reported_and_of_no_job():
    job = JobFactory()
    assert stats("--job", str(job.pk)).endswith(": no progress reported\n")
    assert json.loads(stats("--job", str(job.pk), "--json"))["progress"] is None
    with pytest.raises(CommandError, match="There is no job 987654"):
        stats("--job", "987654")
    with pytest.raises(CommandError, match="--job and --tag"):
        stats("--job", str(job.pk), "--tag", "x")


def test_stats_watch_of_a_job_ends_when_it_finishes():
    job = claimed_job()
    reported(job, (2, 2, "all"))
    assert job.complete()
    # With --watch, a finished job is printed once and the command returns (no Ctrl-C needed).
    assert stats("--job", str(job.pk), "--watch", "1").count(f"job {job.pk}") == 1
