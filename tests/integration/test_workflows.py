"""Workflows (docs/workflows.md): chains, groups, chords and any DAG, run in this process with
the real outcome write; their statuses, the results passed, the failure policy, and the
enqueue's transaction."""

import datetime as dt
import re
from pathlib import Path

import pytest
from django.db import connection, transaction

from django_sqlqueue.exceptions import InvalidArguments, InvalidWorkflow
from django_sqlqueue.models import Job, JobDependency
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.statuses import JobStatus
from django_sqlqueue.workflows import Workflow, chain, chord, group
from tests.support.sqlite_writer import errors_behind_another_writer
from tests.testapp.models import Run
from tests.testapp.tasks import add, flow_step

pytestmark = pytest.mark.django_db


def drain(order=None):
    """Claim and run every ready job until none is left; ``order`` sorts each claim's jobs
    (e.g. reversed, to finish a group out of order). Returns the tags in the order run."""
    while True:
        jobs = Job.objects.claim(None, "w", limit=100)
        if not jobs:
            return list(Run.objects.order_by("pk").values_list("key", flat=True))
        for job in (order(jobs) if order else jobs):
            run_job(job)


def statuses(flow) -> list:
    by_pk = dict(Job.objects.filter(workflow_id=flow.id).values_list("pk", "status"))
    return [by_pk[job.pk] for job in flow.jobs]


def test_a_chain_runs_in_order_each_step_given_the_result_before():
    flow = chain(flow_step.s(tag="a"), flow_step.s(tag="b", expect=["a"]),
                 flow_step.s(tag="c", expect=["b"])).enqueue()
    assert statuses(flow) == ["queued", "waiting", "waiting"]
    assert [job.parents_pending for job in Job.objects.filter(workflow_id=flow.id)
            .order_by("pk")] == [0, 1, 1]
    assert drain() == ["a", "b", "c"]
    assert statuses(flow) == ["succeeded"] * 3
    assert Job.objects.get(pk=flow.jobs[-1].pk).result == "c"


def test_a_waiting_job_is_never_claimed():
    flow = chain(add.s(1, 2), add.s(10)).enqueue()
    claimed = Job.objects.claim(None, "w", limit=10)
    assert [job.pk for job in claimed] == [flow.jobs[0].pk]
    assert Job.objects.claim(None, "w", limit=10) == []  # the child waits for its parent
    run_job(claimed[0])
    (child,) = Job.objects.claim(None, "w", limit=10)  # queued by the parent's outcome write
    run_job(child)
    assert Job.objects.get(pk=child.pk).result == 13  # add(3, 10)


def test_a_chord_callback_runs_once_after_its_group_with_results_in_group_order():
    tags = [f"g{n}" for n in range(6)]
    flow = chord(group(flow_step.s(tag=tag) for tag in tags),
                 flow_step.s(tag="callback", expect=[tags])).enqueue()
    ran = drain(order=lambda jobs: list(reversed(jobs)))  # the group finishes out of order
    assert ran[:-1] == list(reversed(tags)) and ran[-1] == "callback"
    assert statuses(flow) == ["succeeded"] * 7
    assert Job.objects.get(pk=flow.jobs[-1].pk).attempts == 1


def test_parent_results_keep_their_order_with_none_for_a_pruned_or_unfinished_parent():
    flow = chord(group(add.s(n, 1) for n in range(3)), add.s(0)).enqueue()
    first, second, third, callback = (Job.objects.get(pk=job.pk) for job in flow.jobs)
    for parent in (first, third):
        (claimed,) = Job.objects.filter(pk=parent.pk).claim(None, "w", limit=1)
        run_job(claimed)
    Job.objects.filter(pk=first.pk).delete()  # pruned: its edge stays (no foreign key)
    assert JobDependency.objects.filter(child_id=callback.pk).count() == 3
    assert callback.parent_results() == [None, None, 3]  # pruned, still queued, succeeded


def test_a_group_in_a_chain_fans_out_then_in():
    chain(flow_step.s(tag="start"),
          group(flow_step.s(tag="x", expect=["start"]), flow_step.s(tag="y", expect=["start"])),
          flow_step.si(tag="end"), flow_step.s(tag="after", expect=["end"])).enqueue()
    assert drain() == ["start", "x", "y", "end", "after"]


def test_a_workflow_says_any_graph_and_a_step_reads_its_parents_results():
    flow = Workflow()
    a = flow.add(flow_step.s(tag="a"))
    b = flow.add(flow_step.s(tag="b"))
    c = flow.add(flow_step.s(tag="c", expect=[["b", "a"]]), after=[b, a], results="list")
    flow.add(flow_step.s(tag="d", expect=["c"]), after=[c], results="one")
    flow.add(flow_step.si(tag="e"), after=[a])
    made = flow.enqueue()
    drain()
    assert statuses(made) == ["succeeded"] * 5
    assert Job.objects.get(pk=made.jobs[2].pk).parent_results() == ["b", "a"]
    assert list(Job.objects.get(pk=made.jobs[2].pk).parents()) == [made.jobs[1], made.jobs[0]]
    assert list(Job.objects.get(pk=made.jobs[0].pk).children()) == [made.jobs[2], made.jobs[4]]


def test_a_parent_that_fails_for_good_cancels_its_dependents_transitively():
    flow = chain(flow_step.using(max_attempts=1).s(tag="a", fail=True),
                 flow_step.s(tag="b"), flow_step.s(tag="c")).enqueue()
    drain()
    assert statuses(flow) == ["exhausted", "cancelled", "cancelled"]
    b, c = (Job.objects.get(pk=job.pk) for job in flow.jobs[1:])
    assert b.cancelled_by == f"workflow: parent job {flow.jobs[0].pk} ended exhausted"
    assert c.cancelled_by == f"workflow: parent job {b.pk} ended cancelled"
    assert b.finished_at is not None and not Run.objects.filter(key__in=["b", "c"]).exists()


def test_a_retried_parent_releases_its_child_only_when_it_succeeds():
    flow = chain(flow_step.s(tag="a", fail=True), flow_step.s(tag="b")).enqueue()
    (parent,) = Job.objects.claim(None, "w")
    run_job(parent)  # failed, will retry
    assert statuses(flow) == ["failed", "waiting"]
    Job.objects.filter(pk=parent.pk).update(payload={"args": [], "kwargs": {"tag": "a"}})
    Job.objects.filter(pk=parent.pk).run_now()
    drain()
    assert statuses(flow) == ["succeeded", "succeeded"]


def test_run_anyway_counts_a_failed_parent_once_even_if_it_is_retried_later():
    flow = Workflow()
    p1 = flow.add(flow_step.using(max_attempts=1).s(tag="p1", fail=True))
    p2 = flow.add(flow_step.si(tag="p2").using(delay=3600))
    # p1 succeeded by the time the child runs: its result is there.
    flow.add(flow_step.s(tag="cleanup", expect=[["p1", "p2"]]), after=[p1, p2],
             run_anyway=True, results="list")
    made = flow.enqueue()
    drain()  # p1 ends exhausted; p2 is not due yet
    child = Job.objects.get(pk=made.jobs[2].pk)
    assert (child.status, child.parents_pending) == ("waiting", 1)
    Job.objects.filter(pk=made.jobs[0].pk).update(payload={"args": [], "kwargs": {"tag": "p1"}})
    Job.objects.filter(pk=made.jobs[0].pk).retry_now()
    drain()  # p1 succeeds this time: its edge was counted already
    child.refresh_from_db()
    assert (child.status, child.parents_pending) == ("waiting", 1)
    Job.objects.filter(pk=made.jobs[1].pk).run_now()
    drain()
    child.refresh_from_db()
    assert child.status == JobStatus.SUCCEEDED
    assert child.result == "cleanup"


def test_a_chord_callback_that_runs_anyway_gets_none_for_a_failed_job():
    flow = chord([flow_step.s(tag="ok"), flow_step.using(max_attempts=1).s(tag="bad", fail=True)],
                 flow_step.s(tag="report", expect=[["ok", None]]).set(run_anyway=True)).enqueue()
    drain()
    assert statuses(flow) == ["succeeded", "exhausted", "succeeded"]


def test_cancelling_a_workflow_cancels_every_unfinished_job():
    flow = chain(flow_step.s(tag="a"), flow_step.s(tag="b"), flow_step.s(tag="c")).enqueue()
    (first,) = Job.objects.claim(None, "w")
    assert flow.cancel(by="test") == 3  # one running (asked to stop), two waiting
    run_job(first)  # its outcome is written cancelled
    assert statuses(flow) == ["cancelled"] * 3


def test_cancelling_one_queued_job_cancels_the_jobs_waiting_for_it():
    flow = chain(flow_step.s(tag="a"), flow_step.s(tag="b")).enqueue()
    Job.objects.get(pk=flow.jobs[0].pk).cancel()
    assert statuses(flow) == ["cancelled", "cancelled"]
    assert drain() == []


def test_a_workflow_is_enqueued_in_the_callers_transaction_all_or_nothing():
    before = Job.objects.count()
    with pytest.raises(RuntimeError), transaction.atomic():
        chord([add.s(1, 2), add.s(3, 4)], add.s(0)).enqueue()
        raise RuntimeError("the business transaction fails")
    assert Job.objects.count() == before and not JobDependency.objects.exists()


def test_enqueue_on_commit_inserts_the_workflow_at_commit(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        flow = chain(add.s(1, 2), add.s(3)).enqueue_on_commit()
        assert not Job.objects.filter(workflow_id=flow.id).exists()
    assert statuses(flow) == ["queued", "waiting"]
    drain()
    assert Job.objects.get(pk=flow.jobs[1].pk).result == 6


@pytest.mark.parametrize("build, message", [
    (lambda: chain(), "an empty chain"),
    (lambda: group([]), "an empty group"),
    (lambda: chain(add.s(1, 2), 5), "takes signatures"),
    (lambda: add.s(1, 2).using(unique_key="k"), "cannot have a unique_key"),
    (lambda: Workflow().add(add.s(1, 2), after=[Workflow().add(add.s(1, 2))]), "name steps"),
    (lambda: Workflow().enqueue(), "an empty Workflow"),
])
def test_a_malformed_workflow_is_refused_at_the_boundary(build, message):
    with pytest.raises(InvalidWorkflow, match=message):
        build()


DOC = Path(__file__).resolve().parents[2] / "docs" / "workflows.md"


def doc_example(heading: str) -> dict:
    """Run the python block under ``heading`` of docs/workflows.md; its namespace."""
    section = DOC.read_text().split(heading, 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace = {"__name__": "docs_workflows"}
    exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 - our own docs
    return namespace


def test_the_docs_chain_and_chord_run_as_written():
    example = doc_example("## Chains, groups and chords")
    drain()
    results = dict(Job.objects.values_list("task_name", "result").filter(
        task_name__in=["docs_workflows.double", "docs_workflows.total"]).order_by("pk"))
    assert results["docs_workflows.total"] == {"label": "sizes", "total": 17 * 3}
    assert Job.objects.filter(task_name="docs_workflows.double").order_by("pk").last().result == 4
    assert Job.objects.get(pk=example["flow"].jobs[-1].pk).status == JobStatus.SUCCEEDED


def test_the_docs_order_pipeline_compensates_only_after_a_failure():
    doc_example("## Any graph, and compensation on failure")
    drain()
    assert [job.result for job in Job.objects.order_by("pk")] == [
        {"reserved": 42}, {"charged": 42}, {"shipped": 42}, {"nothing to undo": 42}]


def test_a_workflow_of_one_job_and_one_of_more_than_an_insert_batch():
    alone = flow_step.s(tag="alone").enqueue()
    big = chord([add.s(n, n) for n in range(1001)], add.s(1)).enqueue()  # two insert batches
    assert statuses(alone) == ["queued"]
    assert Job.objects.filter(workflow_id=big.id).count() == 1002
    assert Job.objects.get(pk=big.jobs[-1].pk).parents_pending == 1001


def test_pruning_a_finished_child_deletes_its_edges_not_an_unfinished_childs():
    flow = chain(add.s(1, 2), add.s(3), add.s(4)).enqueue()
    (first,) = Job.objects.claim(None, "w")
    run_job(first)
    (second,) = Job.objects.claim(None, "w")
    run_job(second)  # the third is queued: its edge stays while it is unfinished
    assert Job.objects.filter(pk__in=[first.pk, second.pk]).delete_in_batches() == 2
    assert list(JobDependency.objects.values_list("child_id", "parent_id")) == [
        (flow.jobs[2].pk, second.pk)]


def test_the_workers_cleaner_deletes_the_edges_of_the_children_it_prunes():
    """The cleaner deletes with ``delete_batch``, not ``delete_in_batches``: the edges must go
    with the jobs there too, or every pruned workflow leaves its edges behind for ever."""
    from django_sqlqueue.worker.maintenance.cleaner import Cleaner, CleanerConfig

    flow = chain(add.s(1, 2), add.s(3), add.s(4)).enqueue()
    drain()
    later = Job.objects.latest("finished_at").finished_at + dt.timedelta(days=2)
    config = CleanerConfig(keep_succeeded_seconds=86400, batch_size=2)
    assert Cleaner(config, alias="default").run_once(now=later).deleted == 3
    assert not Job.objects.filter(workflow_id=flow.id).exists()
    assert not JobDependency.objects.exists()


def test_a_chain_nested_in_a_chain_and_ending_in_a_group_hands_on_the_list():
    chain(flow_step.s(tag="a"),
          chain(flow_step.s(tag="b", expect=["a"]),
                group(flow_step.s(tag="c", expect=["b"]), flow_step.s(tag="d", expect=["b"]))),
          flow_step.s(tag="e", expect=[["c", "d"]])).enqueue()
    assert drain() == ["a", "b", "c", "d", "e"]
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}


def test_a_prepared_job_leaves_no_column_to_its_database_default():
    """Else the insert could not say it in one statement, and every enqueue would go through
    bulk_create (enqueue/inserting.py): workflow columns included."""
    from django.db.models.expressions import DatabaseDefault

    for job in (add.prepare(1, 2), *Workflow.of(chain(add.s(1, 2), add.s(3)))._prepare()[1]):
        assert not [field.name for field in Job._meta.concrete_fields
                    if isinstance(getattr(job, field.attname), DatabaseDefault)]


def test_retrying_a_failed_parent_resumes_the_jobs_its_failure_cancelled():
    flow = chain(flow_step.using(max_attempts=1).s(tag="a", fail=True),
                 flow_step.s(tag="b", expect=["a"]), flow_step.s(tag="c", expect=["b"])).enqueue()
    drain()
    assert statuses(flow) == ["exhausted", "cancelled", "cancelled"]
    Job.objects.filter(pk=flow.jobs[0].pk).update(payload={"args": [], "kwargs": {"tag": "a"}})
    assert Job.objects.filter(pk=flow.jobs[0].pk).retry_now() == 1
    assert statuses(flow) == ["queued", "waiting", "waiting"]
    assert {job.cancelled_by for job in Job.objects.filter(workflow_id=flow.id)} == {None}
    drain()
    assert statuses(flow) == ["succeeded"] * 3


def test_a_child_of_two_failed_parents_comes_back_once_both_are_retried():
    flow = Workflow()
    p1 = flow.add(flow_step.using(max_attempts=1).s(tag="p1", fail=True))
    p2 = flow.add(flow_step.using(max_attempts=1).s(tag="p2", fail=True))
    flow.add(flow_step.s(tag="child", expect=[["p1", "p2"]]), after=[p1, p2], results="list")
    made = flow.enqueue()
    drain()
    assert statuses(made) == ["exhausted", "exhausted", "cancelled"]
    for n, job in enumerate(made.jobs[:2], 1):
        Job.objects.filter(pk=job.pk).update(payload={"args": [], "kwargs": {"tag": f"p{n}"}})
    Job.objects.filter(pk=made.jobs[0].pk).retry_now()
    assert statuses(made) == ["queued", "exhausted", "cancelled"]  # p2 still failed
    Job.objects.filter(pk=made.jobs[1].pk).retry_now()  # p1 not run yet: both count
    assert statuses(made) == ["queued", "queued", "waiting"]
    assert Job.objects.get(pk=made.jobs[2].pk).parents_pending == 2
    drain()
    assert statuses(made) == ["succeeded"] * 3


def test_a_job_cancelled_by_a_person_is_not_resumed_by_its_parents_retry():
    flow = chain(flow_step.using(max_attempts=1).s(tag="a", fail=True), flow_step.s(tag="b"))
    made = flow.enqueue()
    Job.objects.get(pk=made.jobs[1].pk).cancel(by="alice")
    drain()
    Job.objects.filter(pk=made.jobs[0].pk).retry_now()
    assert statuses(made) == ["queued", "cancelled"]


def test_each_step_is_checked_against_its_function_with_the_parents_results_it_will_get():
    # add(a, b): a chain's next step gets the result before as its first argument, so
    # add.s(10) is a whole call there; add.s() misses b, and add.si(10) (given nothing) too.
    flow = chain(add.s(1, 2), add.s(10)).enqueue()
    drain()
    assert Job.objects.get(pk=flow.jobs[-1].pk).result == 13
    for broken in (chain(add.s(1, 2), add.s()), chain(add.s(1, 2), add.si(10))):
        with pytest.raises(InvalidArguments, match="missing a required argument: 'b'"):
            broken.enqueue()
    assert Job.objects.count() == 2  # nothing of the broken chains was enqueued


@pytest.mark.django_db(transaction=True)
def test_a_cancel_waits_its_turn_behind_another_writer_on_sqlite():
    # A workflow's cancel reads which jobs are in workflows, then writes. In SQLite's deferred
    # transactions (Django's default) that upgrade fails at once with "database is locked"
    # while another connection writes, instead of waiting: the cancel takes the write lock first.
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's locking; runs in the sqlite pass")
    flow = chain(add.s(1, 2), add.s(3)).enqueue()
    assert errors_behind_another_writer(
        lambda: Job.objects.filter(workflow_id=flow.id).cancel(by="ops")) == []
    assert set(Job.objects.filter(workflow_id=flow.id).values_list("status", flat=True)) == {
        JobStatus.CANCELLED}
