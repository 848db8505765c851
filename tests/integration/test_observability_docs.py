"""The Sentry example of docs/observability.md, run as written with a real sentry_sdk whose
transport keeps the events: a failure reported once, on its last attempt, tagged; a rescue
reported as a message."""

import re
from pathlib import Path

import pytest
from django.utils import timezone

from django_sqlqueue import signals
from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job
from tests.factories import claimed_job
from tests.testapp.tasks import add, always_fails

sentry_sdk = pytest.importorskip("sentry_sdk")
from sentry_sdk.transport import Transport  # noqa: E402

pytestmark = pytest.mark.django_db
DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def example() -> str:
    section = DOC.read_text().split("### Example: failed jobs in Sentry", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def sentry_events():
    events = []

    class Keep(Transport):
        def capture_envelope(self, envelope):
            event = envelope.get_event()
            if event is not None:
                events.append(event)

    namespace = {}
    sentry_sdk.init(dsn="https://key@sentry.invalid/1", transport=Keep,
                    default_integrations=False, auto_enabling_integrations=False)
    exec(compile(example(), str(DOC), "exec"), namespace)  # connects its receivers
    try:
        yield events
    finally:
        signals.job_finished.disconnect(namespace["report_failed_job"])
        signals.job_rescued.disconnect(namespace["report_lost_job"])
        sentry_sdk.get_client().close()
        sentry_sdk.get_global_scope().set_client(None)


def test_the_sentry_example_reports_the_last_failure_and_the_lost_jobs(
        sentry_events, django_capture_on_commit_callbacks):
    job = claimed_job(always_fails.using(max_attempts=2, retry_backoff=0, retry_min_delay=0,
                                         retry_max_delay=0), ("card declined",))
    run_job(job)
    assert sentry_events == []  # it will be retried: not reported
    (job,) = Job.objects.claim(None, "w1", now=job.run_at)
    run_job(job)
    (event,) = sentry_events
    (exception,) = event["exception"]["values"]
    assert (exception["type"], exception["value"]) == ("RuntimeError", "card declined")
    assert event["tags"] == {"job.task": "tests.testapp.tasks.always_fails",
                             "job.queue": "default"}
    assert event["contexts"]["job"] == {"id": job.pk, "attempt": 2, "max_attempts": 2,
                                        "outcome": "failed"}

    sentry_events.clear()
    run_job(claimed_job(add, (1, 2)))
    assert sentry_events == []  # a success: nothing

    lost = claimed_job(add, (1, 2), lease=60)
    later = timezone.now() + timezone.timedelta(hours=1)
    with django_capture_on_commit_callbacks(execute=True):
        Job.objects.filter(pk=lost.pk).rescue(later)
    (event,) = sentry_events
    assert event["message"].startswith(f"job {lost.pk} (tests.testapp.tasks.add) was lost")
    assert event["level"] == "warning"
