"""Tags and metadata: set at enqueue or by ``@job``, checked at the boundary, read by the job,
found with ``Job.objects.tagged`` and ``manage.py stats --tag``. The admin's tag filter and
search are in tests/admin/test_job_tags.py."""

import datetime as dt
import json
import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from django_sqlqueue import schedule
from django_sqlqueue.enqueue.validation import MAX_TAGS, METADATA_MAX_BYTES
from django_sqlqueue.exceptions import InvalidMetadata, InvalidTags
from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.schedules import operations
from django_sqlqueue.worker.scheduler import Scheduler, SchedulerConfig
from tests.testapp.tasks import add, labels

pytestmark = pytest.mark.django_db


def test_the_job_reads_its_task_s_tags_and_metadata_or_the_enqueue_s():
    labels.enqueue()
    labels.using(tags=["billing", "customer-42"], metadata={"by": "cron", "n": [1, 2.5]}).enqueue()
    labels.using(tags=None, metadata=None).enqueue()
    results = []
    for job in Job.objects.claim(worker_id="test", limit=3):
        run_job(job)
        job.refresh_from_db()
        results.append(job.result)
    assert results == [
        {"tags": ["reports"], "metadata": {"source": "task"}},
        {"tags": ["billing", "customer-42"], "metadata": {"by": "cron", "n": [1, 2.5]}},
        {"tags": None, "metadata": None},
    ]


def test_jobs_without_tags_store_nothing():
    job = add.enqueue(1, 2)
    assert (job.tags, job.metadata) == (None, None)
    assert Job.objects.filter(tags__isnull=True, metadata__isnull=True).count() == 1
    assert add.using(tags=[], metadata={}).enqueue(1, 2).tags is None


def test_tagged_finds_jobs_with_every_tag_given():
    both = add.using(tags=["billing", "eu"]).enqueue(1, 2)
    billing = add.using(tags=["billing"]).enqueue(1, 2)
    add.using(tags=["billing-eu", "bill"]).enqueue(1, 2)  # no tag is a substring match
    add.enqueue(1, 2)
    assert sorted(Job.objects.tagged("billing").values_list("pk", flat=True)) == [both.pk,
                                                                                billing.pk]
    assert list(Job.objects.tagged("billing", "eu").values_list("pk", flat=True)) == [both.pk]
    assert not Job.objects.tagged("nothing").exists()
    assert Job.objects.tagged("eu").filter(queue="default").get() == both
    with pytest.raises(ValueError, match="one or more tags"):
        Job.objects.tagged()


def test_bulk_enqueue_keeps_each_job_s_tags():
    jobs = Job.objects.bulk_enqueue([add.using(tags=[f"t{n}"], metadata={"n": n}).prepare(n, n)
                                     for n in range(3)] + [add.prepare(9, 9)])
    stored = {job.pk: (job.tags, job.metadata) for job in Job.objects.all()}
    assert [stored[job.pk] for job in jobs] == [(["t0"], {"n": 0}), (["t1"], {"n": 1}),
                                                (["t2"], {"n": 2}), (None, None)]
    assert Job.objects.tagged("t1").get().pk == jobs[1].pk


@pytest.mark.parametrize(("tags", "message"), [
    ("billing", "must be a list of strings"),
    (["ok", ""], "non-empty string"),
    (["x" * 101], "at most 100 characters"),
    ([1], "non-empty string"),
    (["a", "a"], "duplicates"),
    ([f"t{n}" for n in range(MAX_TAGS + 1)], "over the limit of 20"),
])
def test_bad_tags_are_refused_at_enqueue(tags, message):
    with pytest.raises(InvalidTags, match=message):
        add.using(tags=tags).enqueue(1, 2)
    assert not Job.objects.exists()


@pytest.mark.parametrize(("metadata", "message"), [
    (["a"], "must be a dict"),
    ({"at": object()}, r"metadata\['at'\] is <object"),
    ({1: "x"}, "keys must be strings"),
    ({"x": float("nan")}, "JSON cannot store"),
    ({"big": "x" * METADATA_MAX_BYTES}, "over the limit of 4096"),
])
def test_bad_metadata_is_refused_at_enqueue(metadata, message):
    with pytest.raises(InvalidMetadata, match=message):
        add.using(metadata=metadata).enqueue(1, 2)
    assert not Job.objects.exists()


def test_a_job_s_metadata_is_its_own():
    metadata = {"nested": {"n": 1}}
    first, second = (add.using(metadata=metadata).prepare(1, 2) for _ in range(2))
    first.metadata["nested"]["n"] = 2
    assert second.metadata == {"nested": {"n": 1}} and metadata == {"nested": {"n": 1}}


def test_stats_by_tag():
    add.using(tags=["billing"], queue="emails").enqueue(1, 2)
    add.using(tags=["billing"]).enqueue(1, 2)
    add.using(tags=["other"]).enqueue(1, 2)
    (job,) = Job.objects.tagged("other").claim(worker_id="test")  # a filtered claim
    assert job.tags == ["other"]
    out = StringIO()
    call_command("stats", "--tag", "billing", stdout=out)
    text = out.getvalue()
    assert text.splitlines()[0] == "jobs tagged billing"
    assert [line.split()[:3] for line in text.splitlines()[2:]] == [
        ["default", "1", "0"], ["emails", "1", "0"]]
    out = StringIO()
    call_command("stats", "--tag", "billing", "--tag", "missing", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"tags": ["billing", "missing"], "queues": {}}
    with pytest.raises(CommandError, match="--tag takes a tag"):
        call_command("stats", "--tag", " ")


def test_a_schedule_s_jobs_carry_the_task_s_tags_and_metadata(declared_schedules):
    start = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    schedule(every=60, name="labels-often")(labels)
    schedule(every=60, name="add-often", args=[1, 2])(add)
    operations.sync("default", now=start)
    Scheduler(SchedulerConfig(holder="w1"), alias="default").run_once(
        now=start + dt.timedelta(minutes=1))
    jobs = {job.task_name: job for job in Job.objects.all()}
    assert (jobs["tests.labels"].tags, jobs["tests.labels"].metadata) == (
        ["reports"], {"source": "task"})
    assert (jobs[add.name].tags, jobs[add.name].metadata) == (None, None)
    assert Job.objects.tagged("reports").get().schedule_name == "labels-often"


def test_a_reference_kept_in_metadata_tells_a_reused_id_from_the_job(settings):
    # docs/topology.md, "Reused ids": after an asynchronous failover a lost job's id can be
    # given to another job; reading by id and the kept reference finds nothing then.
    ref = str(uuid.uuid4())
    job = add.using(metadata={"ref": ref}).enqueue(1, 2)
    assert Job.objects.filter(pk=job.pk, metadata__ref=ref).first() == job
    other = add.enqueue(3, 4)  # stands for the job that took a lost job's id
    assert Job.objects.filter(pk=other.pk, metadata__ref=ref).first() is None
