"""A django.tasks task reports progress with ``report_progress`` as an @job does; the backend's
``get_progress`` reads it (Django's TaskResult has no field for it)."""

import pytest

django_tasks = pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.tasks import TaskResultStatus, task_backends  # noqa: E402
from django.tasks.exceptions import TaskResultDoesNotExist  # noqa: E402

from tests.testapp import django_tasks as tasks  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_task_reports_progress_and_the_backend_reads_it(start_worker):
    result = tasks.reports_progress.enqueue(50)
    backend = task_backends[result.backend]
    assert backend.get_progress(result.id) is None  # not started
    worker = start_worker("--burst", settings={"POLL_INTERVAL_SECONDS": 0.2})
    assert worker.wait(timeout=120) == 0, worker.output
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 50
    progress = backend.get_progress(result.id)
    assert (progress.done, progress.total, progress.percent, progress.message) == (
        50, 50, 100, "step 50")
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_progress("987654")
