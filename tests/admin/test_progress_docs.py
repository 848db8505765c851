"""docs/progress.md's Python examples, run as written: the job reports, its progress is read
back, and the user's own view streams the job it allows and refuses the others."""

import json
import re
from pathlib import Path

import pytest
from django.http import Http404
from django.test import RequestFactory

from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job

pytestmark = pytest.mark.django_db
DOC = Path(__file__).resolve().parents[2] / "docs" / "progress.md"


def blocks() -> list:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def example(words: str) -> str:
    [found] = [block for block in blocks() if words in block]
    return found


def test_the_job_reports_and_its_progress_is_read(capsys):
    namespace = {"__name__": "docs_progress"}
    exec(example("def import_rows"), namespace)  # noqa: S102 - the doc's own code
    job = namespace["import_rows"].enqueue(["a", "b", "c"])
    [claimed] = Job.objects.claim(None, "docs")
    assert claimed.pk == job.pk and run_job(claimed).outcome == "succeeded"
    exec(example("Job.objects.get(pk=job_id).progress"), {"job_id": job.pk})  # noqa: S102
    printed = capsys.readouterr().out.split()
    assert printed[:4] == ["3", "3", "1.0", "100"] and "imported row 3" in " ".join(printed)


def test_the_users_own_view_streams_only_the_jobs_it_allows():
    namespace = {}
    exec(example("def export_events"), namespace)  # noqa: S102
    view = namespace["export_events"]
    job = Job.objects.enqueue("tests.testapp.tasks.add", [1, 2])
    Job.objects.filter(pk=job.pk).update(status="succeeded", result=3)
    request = RequestFactory().get("/")
    request.session = {"export_job_ids": [job.pk]}
    response = view(request, job.pk)
    body = b"".join(response.streaming_content).decode()
    final = json.loads(body.split("event: finished\ndata: ", 1)[1].split("\n", 1)[0])
    assert final["status"] == "succeeded" and final["result"] == 3
    request.session = {"export_job_ids": []}
    with pytest.raises(Http404):
        view(request, job.pk)
