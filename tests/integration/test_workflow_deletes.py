"""Deleting a workflow's job before it finished (docs/workflows.md, "Deleting a workflow's
jobs"): the jobs waiting for it are settled as a cancelled parent's would be, whether it is
deleted through the ORM (instance, queryset, the admin's action: tests/admin/test_actions.py)
or behind the ORM's back, where the maintenance step ``orphans`` finds them."""

import pytest
from django.db import connection

from django_sqlqueue.models import Job, JobDependency
from django_sqlqueue.worker.maintenance.orphans import Orphans
from django_sqlqueue.worker.maintenance.service import Maintenance
from django_sqlqueue.workflows import Workflow, chain
from tests.testapp.tasks import flow_step

pytestmark = pytest.mark.django_db


def statuses(flow) -> list:
    by_pk = dict(Job.objects.filter(workflow_id=flow.id).values_list("pk", "status"))
    return [by_pk.get(job.pk, "gone") for job in flow.jobs]


def delete_with_raw_sql(job) -> None:
    """As a script or a database console would: no ORM, no settling."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_sqlqueue_job WHERE id = %s", [job.pk])


def reason(job) -> str:
    return Job.objects.get(pk=job.pk).cancelled_by


@pytest.mark.parametrize("how", ["instance", "queryset"])
def test_deleting_an_unfinished_parent_cancels_the_jobs_waiting_for_it(how):
    flow = chain(flow_step.s(tag="a"), flow_step.s(tag="b"), flow_step.s(tag="c")).enqueue()
    parent = Job.objects.get(pk=flow.jobs[0].pk)
    if how == "instance":
        parent.delete()
    else:
        Job.objects.filter(pk=parent.pk).delete()
    assert statuses(flow) == ["gone", "cancelled", "cancelled"]
    assert reason(flow.jobs[1]) == (f"workflow: parent job {flow.jobs[0].pk} was deleted "
                                    "before it finished")
    assert reason(flow.jobs[2]) == f"workflow: parent job {flow.jobs[1].pk} ended cancelled"


def test_a_deleted_child_takes_its_edges_and_run_anyway_releases_the_next():
    flow = Workflow()
    a = flow.add(flow_step.s(tag="a"))
    b = flow.add(flow_step.s(tag="b"), after=[a])
    flow.add(flow_step.s(tag="c"), after=[b], run_anyway=True)
    made = flow.enqueue()
    Job.objects.filter(pk=made.jobs[1].pk).delete()
    assert statuses(made) == ["queued", "gone", "queued"]  # c runs anyway
    assert not JobDependency.objects.filter(child_id=made.jobs[1].pk).exists()


def test_deleting_a_finished_parent_changes_nothing():
    flow = chain(flow_step.s(tag="a"), flow_step.s(tag="b")).enqueue()
    (parent,) = Job.objects.claim(None, "w")
    parent.complete("a")
    parent.delete()
    assert statuses(flow) == ["gone", "queued"]


def test_a_sliced_delete_is_refused_as_django_refuses_it_and_settles_nothing():
    flow = chain(flow_step.s(tag="a"), flow_step.s(tag="b")).enqueue()
    with pytest.raises(TypeError, match="Cannot use 'limit' or 'offset' with delete"):
        Job.objects.filter(workflow_id=flow.id)[:1].delete()
    assert statuses(flow) == ["queued", "waiting"]


def test_maintenance_settles_the_children_of_parents_deleted_with_raw_sql():
    flow = chain(flow_step.s(tag="a"), flow_step.s(tag="b"), flow_step.s(tag="c")).enqueue()
    other = chain(flow_step.s(tag="x"), flow_step.s(tag="y")).enqueue()
    delete_with_raw_sql(flow.jobs[0])
    assert statuses(flow) == ["gone", "waiting", "waiting"]  # waiting for ever, until:
    result = Orphans(alias="default").run_once()
    assert (result.parents, result.batches) == (1, 1)
    assert statuses(flow) == ["gone", "cancelled", "cancelled"]
    assert reason(flow.jobs[1]).endswith(f"job {flow.jobs[0].pk} was deleted before it finished")
    assert statuses(other) == ["queued", "waiting"]  # its parent is there
    assert Orphans(alias="default").run_once().parents == 0  # settled once


def test_the_maintenance_pass_runs_the_orphans_step_after_the_cleaner_s_sweep():
    flow = chain(flow_step.s(tag="a"), flow_step.s(tag="b")).enqueue()
    delete_with_raw_sql(flow.jobs[0])
    maintenance = Maintenance(alias="default", lease_seconds=30, keep_succeeded=None,
                              keep_failed=None, worker_id="test-orphans")
    result = maintenance.run_once()
    assert result.leading and result.orphaned == 1 and not result.failed_steps
    assert statuses(flow) == ["gone", "cancelled"]
    assert maintenance.run_once().orphaned == 0  # the cleaner's next sweep is not due yet
