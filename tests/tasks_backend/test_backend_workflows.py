"""Workflows of django.tasks tasks (docs/workflows.md): ``signature(task, args, kwargs)`` is a
step, in chains and chords with ``@job`` steps; the results are passed after the context of a
task that takes one; a waiting job's result is READY."""

import pytest

django_tasks = pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.tasks import TaskResultStatus  # noqa: E402

from django_sqlqueue.models import Job  # noqa: E402
from django_sqlqueue.workflows import chain, chord, signature  # noqa: E402
from tests.support.draining import drain  # noqa: E402
from tests.testapp import django_tasks as tasks  # noqa: E402
from tests.testapp import tasks as job_tasks  # noqa: E402

pytestmark = pytest.mark.django_db


def test_a_chord_of_django_tasks_gives_the_callback_the_results_in_order():
    flow = chord([signature(tasks.add, (n, n)) for n in range(4)],
                 signature(tasks.total, kwargs={"label": "doubles"})).enqueue()
    callback = flow.jobs[-1]
    assert tasks.total.get_result(str(callback.pk)).status == TaskResultStatus.READY  # waiting
    drain()
    result = tasks.total.get_result(str(callback.pk))
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"label": "doubles", "sum": 0 + 2 + 4 + 6}


def test_a_chain_mixes_django_tasks_and_job_functions_and_keeps_the_context_first():
    flow = chain(signature(tasks.add, (1, 2)), job_tasks.add.s(10),
                 signature(tasks.add.using(priority=5), (100,)),
                 chord([signature(tasks.add, (1,))], signature(tasks.total_with_context))
                 ).enqueue()
    drain()
    results = [Job.objects.get(pk=job.pk).result for job in flow.jobs]
    assert results[:3] == [3, 13, 113]
    assert Job.objects.get(pk=flow.jobs[2].pk).priority == 5
    # The group after a step gets its result; the callback the list, after its context.
    assert results[3] == 113 + 1
    assert results[4] == [str(flow.jobs[4].pk), 114]


def test_a_task_of_another_backend_is_refused():
    from django_sqlqueue.exceptions import InvalidWorkflow

    with pytest.raises(InvalidWorkflow, match="neither a @job task nor a django.tasks task"):
        chain(signature(tasks.immediate_add, (1, 2))).enqueue()


def test_the_docs_django_tasks_chord_runs_as_written():
    import re
    import sys
    import types
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "workflows.md"
    section = doc.read_text().split("## django.tasks tasks", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    module = types.ModuleType("docs_workflows_tasks")  # a worker finds tasks in sys.modules
    sys.modules[module.__name__] = module
    try:
        exec(compile(code, str(doc), "exec"), module.__dict__)  # noqa: S102 - our own docs
        drain()
        result = module.report.get_result(str(module.flow.jobs[-1].pk))
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.return_value == {"label": "total", "words": 5}
    finally:
        del sys.modules[module.__name__]
