"""A receiver of Django's task signals that raises (a bug, or its own write while the database
is away) never loses the attempt's outcome: it is logged, and the outcome is written. Let
through, it left the job held by no thread until its lease ran out."""

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.tasks.signals import task_finished, task_started  # noqa: E402

from django_sqlqueue.models import Job  # noqa: E402
from django_sqlqueue.run.execution import run_job  # noqa: E402
from django_sqlqueue.statuses import JobStatus  # noqa: E402
from tests.testapp import django_tasks as tasks  # noqa: E402

pytestmark = pytest.mark.django_db


def broken_receiver(sender, **kwargs):
    raise RuntimeError("the receiver is broken")


@pytest.mark.parametrize("signal", [task_started, task_finished], ids=["started", "finished"])
def test_a_raising_receiver_changes_no_outcome(signal, caplog):
    result = tasks.add.enqueue(2, 3)
    (job,) = Job.objects.claim(None, "w:1:x")
    signal.connect(broken_receiver)
    try:
        ran = run_job(job)
    finally:
        signal.disconnect(broken_receiver)
    assert ran.outcome == "succeeded"
    assert Job.objects.get(pk=int(result.id)).status == JobStatus.SUCCEEDED
    assert "the receiver is broken" in caplog.text and "its outcome stands" in caplog.text
