"""Durable steps work the same in django.tasks tasks run by the SQLQueueBackend (docs/steps.md):
a task run again returns its completed steps' recorded results without running them."""

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.tasks import TaskResultStatus, task_backends  # noqa: E402

from django_sqlqueue.models import Job, JobStep  # noqa: E402
from django_sqlqueue.run.execution import run_job  # noqa: E402
from tests.support.claims import claim_now  # noqa: E402
from tests.testapp import django_tasks as tasks  # noqa: E402
from tests.testapp.step_tasks import executions  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_task_run_again_skips_its_completed_step(tmp_path):
    result = tasks.stepped.enqueue(str(tmp_path))
    pk = int(result.id)
    assert run_job(claim_now(pk)).outcome != "succeeded"  # failed after step 1
    assert run_job(claim_now(pk)).outcome == "succeeded"
    assert task_backends["default"].get_result(result.id).status == TaskResultStatus.SUCCESSFUL
    assert Job.objects.get(pk=pk).result == [10, 20]
    assert (executions(tmp_path, "step1"), executions(tmp_path, "step2")) == (1, 1)
    assert list(JobStep.objects.filter(job_id=pk).order_by("pk").values_list("name", flat=True)) \
        == ["step1", "step2"]
