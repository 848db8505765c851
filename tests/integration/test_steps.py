"""Durable steps (run/steps.py): a completed step returns its recorded result when its job runs
again; an atomic step's writes and its record commit together, exactly once."""

import pytest

from django_sqlqueue import step, step_key
from django_sqlqueue.exceptions import StepError
from django_sqlqueue.models import Job, JobStep
from django_sqlqueue.run.execution import run_job
from django_sqlqueue.run.runner import run
from tests.factories import claimed_job
from tests.support.claims import claim_now
from tests.testapp.models import Execution, Order
from tests.testapp.step_tasks import executions
from tests.testapp.tasks import takes_anything

pytestmark = pytest.mark.django_db(transaction=True)


def run_twice(task_name, marker_dir):
    """Run a job to success, then once more (as a rescue after a kill right before its outcome
    write would): returns the job as the second run left it."""
    job = claimed_job(task_name, (str(marker_dir),))
    assert run_job(job).outcome == "succeeded"
    again = claim_now(job.pk, "w2")
    assert run_job(again).outcome == "succeeded"
    again.refresh_from_db()
    return again


def test_a_rerun_returns_recorded_results_and_runs_only_the_rest(tmp_path):
    job = claimed_job("tests.five_steps", (str(tmp_path),), {"fail_after": 3})
    assert run_job(job).outcome == "failed"
    assert [executions(tmp_path, f"step{n}") for n in range(1, 6)] == [1, 1, 1, 0, 0]

    again = claim_now(job.pk, "w2")
    assert run_job(again).outcome == "succeeded"
    again.refresh_from_db()
    assert again.result == [10, 20, 30, 40, 50]
    assert [executions(tmp_path, f"step{n}") for n in range(1, 6)] == [1, 1, 1, 1, 1]
    steps = list(JobStep.objects.filter(job_id=job.pk).order_by("id")
                 .values_list("name", "result", "attempt"))
    assert steps == [("step1", 10, 1), ("step2", 20, 1), ("step3", 30, 1), ("step4", 40, 2),
                     ("step5", 50, 2)]
    for row in JobStep.objects.filter(job_id=job.pk):
        assert row.started_at <= row.finished_at and row.duration_seconds >= 0


def test_the_recorded_steps_are_read_in_one_query_at_the_first_step(tmp_path,
                                                                     django_assert_num_queries):
    job = claimed_job("tests.five_steps", (str(tmp_path),), {"fail_after": 5})
    run_job(job)  # all five recorded, then it failed
    again = claim_now(job.pk, "w2")
    with django_assert_num_queries(1):  # the read of the recorded steps, nothing else
        outcome = run(again)
    assert (outcome.kind, outcome.result) == ("succeeded", [10, 20, 30, 40, 50])


def test_a_job_that_takes_no_step_reads_no_step(django_assert_num_queries):
    job = claimed_job(takes_anything, (1,))
    with django_assert_num_queries(0):
        assert run(job).kind == "succeeded"


def test_a_run_overtaken_by_another_rolls_back_its_writes_and_returns_the_recorded(tmp_path):
    job = claimed_job("tests.raced_step", (str(tmp_path),))
    assert run_job(job).outcome == "succeeded"
    job.refresh_from_db()
    assert executions(tmp_path, "raced") == 2  # both runs called the function...
    assert list(Order.objects.values_list("total", flat=True)) == [2]  # ...one write stayed
    assert job.result == "second"  # and the first run returned the second's recorded result
    assert list(JobStep.objects.filter(job_id=job.pk).values_list("result", flat=True)) == [
        "second"]


def test_a_failing_atomic_step_rolls_back_its_writes_and_is_not_recorded(tmp_path):
    job = claimed_job("tests.step_fails", (str(tmp_path),))
    result = run_job(job)
    assert result.outcome == "failed"
    assert executions(tmp_path, "fails") == 1
    assert Order.objects.count() == 0
    assert not JobStep.objects.filter(job_id=job.pk).exists()


def test_a_step_that_is_not_atomic_is_recorded_with_its_idempotency_key(tmp_path):
    again = run_twice("tests.step_outside_atomic", tmp_path)
    assert again.result == f"sqlqueue-job-{again.pk}-step-external"
    assert executions(tmp_path, "external") == 1


def test_an_async_job_takes_steps_and_its_atomic_step_writes_once(tmp_path):
    again = run_twice("tests.async_steps", tmp_path)
    assert again.result == [{"price": 12}, 12]
    assert (executions(tmp_path, "fetch"), executions(tmp_path, "order-12")) == (1, 1)
    assert list(Order.objects.values_list("total", flat=True)) == [12]


def test_a_step_name_taken_twice_in_a_run_fails_the_job_naming_it():
    job = claimed_job("tests.step_misuse", ("duplicate",))
    assert run_job(job).outcome == "failed"
    job.refresh_from_db()
    assert "The step 'same' was already taken" in job.errors[-1]["message"]


def test_a_result_that_is_not_json_fails_the_step_naming_it():
    job = claimed_job("tests.step_misuse", ("not_json",))
    assert run_job(job).outcome == "failed"
    job.refresh_from_db()
    assert "the result of step 'bad'" in job.errors[-1]["message"]
    assert not JobStep.objects.exists()


def test_a_step_that_raised_can_be_tried_again_in_the_same_run(tmp_path):
    job = claimed_job("tests.step_tried_again", (str(tmp_path),))
    assert run_job(job).outcome == "succeeded"
    job.refresh_from_db()
    assert job.result == "second try" and executions(tmp_path, "flaky") == 2
    assert list(Order.objects.values_list("total", flat=True)) == [1]  # the first rolled back


def test_a_step_outside_a_job_is_an_error_that_says_so():
    with pytest.raises(StepError, match="called outside a job"):
        step("alone", int)
    with pytest.raises(StepError, match="outside a job"):
        step_key("alone")


def test_deleting_jobs_deletes_their_steps(tmp_path):
    kept = claimed_job("tests.five_steps", (str(tmp_path),))
    run_job(kept)
    pruned = claimed_job("tests.five_steps", (str(tmp_path),))
    run_job(pruned)
    assert Job.objects.filter(pk=pruned.pk).delete_in_batches(batch_size=1) == 1
    assert set(JobStep.objects.values_list("job_id", flat=True)) == {kept.pk}
    Job.objects.filter(pk=kept.pk).delete()  # the ORM's delete (the admin's) cascades
    assert not JobStep.objects.exists()
    assert Execution.objects.count() == 10
