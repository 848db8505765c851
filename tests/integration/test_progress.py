"""Progress (run/progress.py): reports cost no query, a flush writes every changed job's latest
value in one fenced UPDATE, the runner writes the final value, and ``Job.progress`` reads it.

The bound on writes comes from construction: the flush is driven by hand, and the statements
are counted, so nothing here depends on how fast the machine is."""

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_sqlqueue import report_progress
from django_sqlqueue.conf import get_settings
from django_sqlqueue.context import _current_job
from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.run.progress import MAX_MESSAGE_CHARS, Progress, board
from django_sqlqueue.run.runner import arun
from django_sqlqueue.statuses import JobStatus
from tests.factories import claimed_job
from tests.testapp.tasks import async_progress, progress_burst

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def empty_board():
    board.discard()
    yield
    board.discard()


def progress_writes(queries) -> int:
    return sum(1 for query in queries
               if query["sql"].lstrip().upper().startswith("UPDATE") and "progress_done" in
               query["sql"])


def as_current(job):
    return _current_job.set(job)


def test_ten_thousand_reports_run_no_query_and_one_flush_writes_the_latest():
    job = claimed_job()
    token = as_current(job)
    try:
        with CaptureQueriesContext(connection) as reports:
            for done in range(1, 10_001):
                assert report_progress(done, 10_000, f"row {done}") is True
        assert len(reports.captured_queries) == 0
    finally:
        _current_job.reset(token)
    assert Job.objects.get(pk=job.pk).progress is None  # nothing written yet

    with CaptureQueriesContext(connection) as flush:
        assert board.flush() == 1
    assert progress_writes(flush.captured_queries) == len(flush.captured_queries) == 1
    progress = Job.objects.get(pk=job.pk).progress
    assert (progress.done, progress.total, progress.message) == (10_000, 10_000, "row 10000")
    assert progress.fraction == 1.0 and progress.percent == 100 and progress.at is not None

    with CaptureQueriesContext(connection) as again:
        assert board.flush() == 0  # nothing changed since: no query at all
    assert again.captured_queries == []


def test_one_statement_writes_every_changed_job():
    first = claimed_job(queue="a")
    second = claimed_job(queue="b")
    for job, done, total, message in ((first, 3, 10, "three"), (second, 7, None, "")):
        token = as_current(job)
        report_progress(done, total, message)
        _current_job.reset(token)
    with CaptureQueriesContext(connection) as flush:
        assert board.flush() == 2
    assert len(flush.captured_queries) == 1
    assert Job.objects.get(pk=first.pk).progress.percent == 30
    latest = Job.objects.get(pk=second.pk).progress
    assert (latest.done, latest.total, latest.fraction, latest.message) == (7, None, None, "")


def test_a_claim_lost_meanwhile_fences_the_write_out():
    job = claimed_job()
    token = as_current(job)
    report_progress(1, 2)
    _current_job.reset(token)
    Job.objects.filter(pk=job.pk).update(claim_token="6f1c7a4e-0000-4000-8000-000000000000")
    assert board.flush() == 0
    assert Job.objects.get(pk=job.pk).progress is None


def test_the_runner_writes_the_final_value_before_the_outcome():
    job = claimed_job(progress_burst.name, [10_000])
    with CaptureQueriesContext(connection) as run:
        result = run_job(job)
    assert result.outcome == "succeeded"
    # 10,000 reports: one progress write, the last value, when the function returned.
    assert progress_writes(run.captured_queries) == 1
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED
    assert (job.progress.done, job.progress.total, job.progress.message) == (
        10_000, 10_000, "step 10000")


def test_an_async_job_reports_on_the_event_loop():
    job = claimed_job(async_progress.name, [500])
    # As the worker's loop runs it: the final write on the sync_to_async thread, which is this
    # one under async_to_sync (and so this test's connection).
    outcome = async_to_sync(arun)(job)
    assert outcome.kind == "succeeded"
    assert Job.objects.get(pk=job.pk).progress == Progress(
        500, 500, "async", Job.objects.get(pk=job.pk).progress_at)


def test_outside_a_job_a_report_does_nothing():
    assert report_progress(1, 2, "from a management command") is False
    with CaptureQueriesContext(connection) as flush:
        assert board.flush() == 0
    assert flush.captured_queries == []


@pytest.mark.parametrize(("args", "error", "words"), [
    ((-1,), ValueError, "done must not be negative"),
    ((1.5, 2), TypeError, "done must be an int, got float 1.5"),
    ((True,), TypeError, "done must be an int"),
    ((1, -2), ValueError, "total must not be negative"),
    ((3, 2), ValueError, "done (3) is more than total (2)"),
    ((1, 2, None), TypeError, "message must be a str"),
    ((1, 2, "x" * (MAX_MESSAGE_CHARS + 1)), ValueError, f"at most {MAX_MESSAGE_CHARS}"),
])
def test_bad_reports_are_refused_naming_the_fix(args, error, words):
    with pytest.raises(error) as raised:
        report_progress(*args)
    assert words in str(raised.value)


def test_a_total_of_zero_is_complete():
    assert Progress(0, 0).fraction == 1.0 and Progress(5).fraction is None
    assert Progress(1, 4, "a").as_dict()["percent"] == 25


def test_a_claim_does_not_read_the_progress_columns_and_the_job_loads_them_when_asked():
    job = claimed_job()
    Job.objects.filter(pk=job.pk).update(progress_done=4, progress_total=8,
                                         progress_message="half", progress_at=job.claimed_at)
    assert {"progress_done", "progress_at"} <= job.get_deferred_fields()
    with CaptureQueriesContext(connection) as read:
        assert job.progress.percent == 50
    assert len(read.captured_queries) == 1


@pytest.mark.parametrize(("value", "message"), [
    (0, "PROGRESS_INTERVAL_SECONDS must be positive"),
    (-1, "PROGRESS_INTERVAL_SECONDS must be positive"),
    ("0.5", "SQLQUEUE['PROGRESS_INTERVAL_SECONDS'] must be"),
])
def test_a_bad_progress_interval_is_refused(settings, value, message):
    settings.SQLQUEUE = {"PROGRESS_INTERVAL_SECONDS": value}
    with pytest.raises(ImproperlyConfigured) as raised:
        get_settings()
    assert message in str(raised.value)
