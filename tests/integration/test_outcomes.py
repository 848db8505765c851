"""Claiming and the outcomes of a claimed job: complete, fail, reschedule, release, cancel, expire,
and the fencing that keeps a worker whose lease was lost from overwriting the new owner's work.

Times are injected with ``now=`` from a fixed instant, so nothing sleeps."""

import datetime as dt
import uuid

import pytest
from django.db.models import signals

from django_sqlqueue.conf import get_settings
from django_sqlqueue.exceptions import InvalidPayload, InvalidSchedule
from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.factories import JobFactory, claimed_job
from tests.support.claims import claim_one
from tests.testapp.tasks import add, send_email

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.timezone.utc)


def at(seconds):
    return T0 + dt.timedelta(seconds=seconds)


def row(job):
    return Job.objects.values().get(pk=job.pk)


def raised(exc):
    try:
        raise exc
    except Exception as caught:
        return caught


# ---- complete -----------------------------------------------------------------------------------
def test_complete_stores_result_and_finished_at():
    job = claimed_job(run_at=T0, now=T0)
    assert job.complete({"sum": 3, "items": [1, 2]}, now=at(2)) is True
    assert job.status == JobStatus.SUCCEEDED
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED
    assert job.result == {"sum": 3, "items": [1, 2]}
    assert job.finished_at == at(2)
    assert job.lease_expires_at is None
    assert job.attempts == 1 and job.errors == []


def test_complete_with_non_json_result_raises_and_changes_nothing():
    job = claimed_job(run_at=T0, now=T0)
    before = row(job)
    with pytest.raises(InvalidPayload, match=r"the result\['when'\] is datetime"):
        job.complete({"when": T0}, now=at(1))
    assert row(job) == before


# ---- fail ---------------------------------------------------------------------------------------
def test_fail_with_attempts_left_schedules_the_retry_by_the_job_policy():
    job = claimed_job(run_at=T0, now=T0, retry_backoff=10, retry_min_delay=1, max_attempts=3)
    assert job.fail(raised(RuntimeError("boom 1")), now=at(3)) is True
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.run_at == at(13)
    assert job.finished_at is None and job.lease_expires_at is None
    [entry] = job.errors
    assert entry["attempt"] == 1
    assert entry["at"] == at(3).isoformat()
    assert entry["type"] == "builtins.RuntimeError"
    assert entry["message"] == "boom 1"
    assert "Traceback" in entry["traceback"]
    assert "RuntimeError: boom 1" in entry["traceback"]
    assert entry["worker"] == "w1"
    # Not ready before its retry time; then claimed again as attempt 2.
    assert Job.objects.claim(now=at(12.9)) == []
    again = claim_one(now=at(13))
    assert (again.pk, again.attempts, again.status) == (job.pk, 2, JobStatus.RUNNING)


def test_fail_uses_the_settings_policy_by_default(settings):
    settings.SQLQUEUE = {**settings.SQLQUEUE, "BACKOFF_SECONDS": 3, "MIN_RETRY_DELAY_SECONDS": 0}
    job = claimed_job(run_at=T0, now=T0)  # RETRY_JITTER is 0 in the test settings
    job.fail(ValueError("no"), now=at(1))
    job = claim_one(now=at(4))
    job.fail(ValueError("no"), now=at(4))
    job.refresh_from_db()
    assert job.run_at == at(10)  # 3 * 2**(2 - 1) seconds after the second failure


def test_retries_back_off_exponentially_then_exhaust_on_the_last_attempt():
    job = claimed_job(run_at=T0, now=T0, max_attempts=5, retry_backoff=2, retry_max_delay=10)
    now = T0
    for attempt, delay in enumerate([2, 4, 8, 10], start=1):
        assert job.attempts == attempt
        assert job.fail(raised(ValueError(f"attempt {attempt}")), now=now) is True
        job.refresh_from_db()
        assert (job.status, job.run_at) == (JobStatus.FAILED, now + dt.timedelta(seconds=delay))
        now = job.run_at
        job = claim_one(now=now)
    assert job.attempts == 5
    assert job.fail(raised(ValueError("attempt 5")), now=now) is True
    job.refresh_from_db()
    assert job.status == JobStatus.EXHAUSTED
    assert job.finished_at == now
    assert [e["attempt"] for e in job.errors] == [1, 2, 3, 4, 5]
    assert [e["message"] for e in job.errors][-1] == "attempt 5"
    assert Job.objects.claim(now=at(10_000)) == []


def test_task_policy_applies_to_its_jobs():
    job = claimed_job(send_email, ("a@example.com",), now=at(0))  # max_attempts=2, backoff=10
    job.fail(RuntimeError("smtp down"), now=at(1))
    job.refresh_from_db()
    assert (job.status, job.run_at) == (JobStatus.FAILED, at(11))
    job = claim_one(now=at(11), queues="emails")
    job.fail(RuntimeError("smtp down"), now=at(12))
    job.refresh_from_db()
    assert job.status == JobStatus.EXHAUSTED
    assert len(job.errors) == 2


def test_fail_without_retry_exhausts_a_job_with_attempts_left():
    job = claimed_job(run_at=T0, now=T0, max_attempts=5)
    assert job.fail(raised(KeyError("gone")), retry=False, now=at(1)) is True
    job.refresh_from_db()
    assert (job.status, job.finished_at) == (JobStatus.EXHAUSTED, at(1))
    assert job.errors[0]["type"] == "builtins.KeyError"
    assert job.errors[0]["message"] == "'gone'"


def test_fail_with_a_plain_message_or_unraised_exception_records_no_traceback():
    job = claimed_job(run_at=T0, now=T0)
    job.fail("upstream said no", now=at(1))
    job = claim_one(now=at(100))
    job.fail(ValueError(), now=at(101))
    job.refresh_from_db()
    first, second = job.errors
    assert (first["type"], first["message"], first["traceback"]) == (
        "error", "upstream said no", ""
    )
    assert (second["type"], second["message"], second["traceback"]) == (
        "builtins.ValueError", "builtins.ValueError", ""
    )


def test_long_tracebacks_keep_their_end(settings):
    settings.SQLQUEUE = {**settings.SQLQUEUE, "MAX_TRACEBACK_CHARS": 50}
    job = claimed_job(run_at=T0, now=T0)
    job.fail(raised(RuntimeError("x" * 100 + "END")), now=at(1))
    job.refresh_from_db()
    entry = job.errors[0]
    assert entry["message"] == "x" * 50
    assert len(entry["traceback"]) == 50
    assert entry["traceback"].rstrip().endswith("END")


# ---- reschedule and release ---------------------------------------------------------------------
def test_reschedule_with_delay_queues_the_job_and_gives_the_attempt_back():
    job = claimed_job(run_at=T0, now=T0, max_attempts=5)
    assert job.reschedule(delay=30, now=at(1)) is True
    assert job.max_attempts == 6
    job.refresh_from_db()
    assert (job.status, job.run_at, job.max_attempts) == (JobStatus.QUEUED, at(31), 6)
    assert job.attempts == 1 and job.errors == []
    assert Job.objects.claim(now=at(30)) == []
    assert claim_one(now=at(31)).attempts == 2  # attempts never go down


def test_reschedule_with_run_at():
    job = claimed_job(run_at=T0, now=T0)
    assert job.reschedule(run_at=at(3600), now=at(1)) is True
    job.refresh_from_db()
    assert (job.status, job.run_at) == (JobStatus.QUEUED, at(3600))


@pytest.mark.parametrize(
    "options", [{}, {"delay": -1}, {"delay": 5, "run_at": T0}, {"run_at": T0.replace(tzinfo=None)}]
)
def test_invalid_reschedule_raises_and_changes_nothing(options):
    job = claimed_job(run_at=T0, now=T0)
    before = row(job)
    with pytest.raises(InvalidSchedule):
        job.reschedule(now=at(1), **options)
    assert row(job) == before


def test_rescheduling_does_not_use_up_a_failure():
    job = claimed_job(run_at=T0, now=T0, max_attempts=2)
    job.reschedule(delay=0, now=at(1))
    job = claim_one(now=at(1))
    job.fail(RuntimeError("first failure"), now=at(2))
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED  # one more try is still allowed
    job = claim_one(now=at(100))
    job.fail(RuntimeError("second failure"), now=at(101))
    job.refresh_from_db()
    assert (job.status, job.attempts, job.max_attempts) == (JobStatus.EXHAUSTED, 3, 3)


def test_release_queues_the_job_due_now_without_counting_the_attempt():
    job = claimed_job(run_at=T0, now=T0, max_attempts=5)
    assert job.release(now=at(5)) is True
    job.refresh_from_db()
    assert (job.status, job.run_at, job.max_attempts) == (JobStatus.QUEUED, at(5), 6)
    assert job.lease_expires_at is None
    assert claim_one("w2", now=at(5)).claimed_by == "w2"


# ---- cancel -------------------------------------------------------------------------------------
@pytest.mark.parametrize("traits", [{}, {"failed": True}, {"scheduled": True}])
def test_cancel_a_job_that_has_not_started(traits):
    job = JobFactory(**traits)
    assert job.cancel(now=at(1)) is True
    assert (job.status, job.finished_at) == (JobStatus.CANCELLED, at(1))
    job.refresh_from_db()
    assert (job.status, job.finished_at) == (JobStatus.CANCELLED, at(1))
    assert Job.objects.claim(now=at(10_000)) == []


@pytest.mark.parametrize("traits", [{"succeeded": True}, {"exhausted": True}, {"cancelled": True}])
def test_cancel_a_finished_job_does_nothing(traits):
    job = JobFactory(**traits)
    before = row(job)
    assert job.cancel(now=at(1)) is False
    assert row(job) == before


# A running job's cancel is a request: tests/integration/test_cancellation.py.


def test_queryset_cancel_returns_the_count_and_respects_filters():
    JobFactory.create_batch(2)
    JobFactory(failed=True, queue="other")
    JobFactory(running=True)
    JobFactory(succeeded=True)
    assert Job.objects.filter(queue="other").cancel(now=at(1)) == 1
    assert Job.objects.all().cancel(now=at(1)) == 3  # the running one is asked to stop
    assert Job.objects.all().cancel(now=at(2)) == 0  # and is not counted twice
    counts = {s: Job.objects.filter(status=s).count() for s in JobStatus.values}
    assert counts[JobStatus.CANCELLED] == 3
    assert counts[JobStatus.RUNNING] == counts[JobStatus.SUCCEEDED] == 1
    assert Job.objects.cancelling().count() == 1


# ---- expire -------------------------------------------------------------------------------------
def test_expire_marks_ready_jobs_past_expires_at_and_claim_never_returns_them():
    stale = Job.objects.enqueue(add, (1, 2), run_at=T0, max_age=60)
    fresh = Job.objects.enqueue(add, (3, 4), run_at=T0)
    assert stale.expires_at == at(60)
    assert [j.pk for j in Job.objects.claim(now=at(60), limit=5)] == [fresh.pk]
    assert Job.objects.expire(now=at(59)) == 0
    assert Job.objects.expire(now=at(60)) == 1
    stale.refresh_from_db()
    assert (stale.status, stale.finished_at) == (JobStatus.EXPIRED, at(60))
    assert Job.objects.expire(now=at(61)) == 0


def test_expire_also_ends_a_job_waiting_for_its_retry_but_not_a_running_one():
    waiting = claimed_job(run_at=T0, now=T0, max_age=60)
    waiting.fail(RuntimeError("x"), now=at(1))  # retry due at(6)
    running = claimed_job(run_at=T0, now=at(50), max_age=60, queue="other")
    assert Job.objects.expire(now=at(61)) == 1
    assert row(waiting)["status"] == JobStatus.EXPIRED
    assert row(running)["status"] == JobStatus.RUNNING
    assert running.complete(None, now=at(62)) is True  # started in time, allowed to finish


# ---- fencing ------------------------------------------------------------------------------------
def test_worker_that_lost_its_lease_cannot_touch_the_new_owners_job():
    old = claimed_job(run_at=T0, now=T0, worker_id="w1")
    # The lease is lost: the job is made ready again (as a rescuer would) and claimed by w2.
    Job.objects.filter(pk=old.pk).update(status=JobStatus.QUEUED, run_at=at(61))
    new = claim_one("w2", now=at(61))
    max_attempts = old.max_attempts
    assert new.pk == old.pk and new.claim_token != old.claim_token
    assert (new.attempts, new.claimed_by) == (2, "w2")
    before = row(new)
    assert old.complete("stale", now=at(70)) is False
    assert old.fail(raised(RuntimeError("stale")), now=at(70)) is False
    assert old.fail(RuntimeError("stale"), retry=False, now=at(70)) is False
    assert old.release(now=at(70)) is False
    assert old.reschedule(delay=5, now=at(70)) is False
    assert row(new) == before
    assert (old.status, old.max_attempts, old.errors) == (JobStatus.RUNNING, max_attempts, [])
    assert new.complete("fresh", now=at(80)) is True
    assert (row(new)["status"], row(new)["result"]) == (JobStatus.SUCCEEDED, "fresh")
    assert old.complete("stale", now=at(90)) is False
    assert row(new)["result"] == "fresh"


def test_an_outcome_applies_once():
    job = claimed_job(run_at=T0, now=T0)
    assert job.complete(1, now=at(1)) is True
    before = row(job)
    assert job.fail(RuntimeError("late"), now=at(2)) is False
    assert job.release(now=at(2)) is False
    assert job.complete(2, now=at(2)) is False
    assert row(job) == before


# ---- claim --------------------------------------------------------------------------------------
def test_claim_sets_the_owner_the_lease_and_counts_the_attempt():
    job = Job.objects.enqueue(add, (1, 2), run_at=T0)
    claimed = claim_one("host:1:main", now=at(5))
    assert claimed.pk == job.pk
    assert claimed.status == JobStatus.RUNNING
    assert (claimed.claimed_by, claimed.claimed_at) == ("host:1:main", at(5))
    lease = dt.timedelta(seconds=get_settings().LEASE_SECONDS)
    assert claimed.lease_expires_at == at(5) + lease
    assert claimed.attempts == 1
    assert isinstance(claimed.claim_token, uuid.UUID)
    stored = row(job)
    for name in ("status", "claimed_by", "claimed_at", "lease_expires_at", "attempts"):
        assert stored[name] == getattr(claimed, name)
    assert stored["claim_token"] == claimed.claim_token
    assert Job.objects.claim(now=at(6)) == []  # a running job is not claimed again


def test_a_claimed_job_is_the_row_as_the_orm_loads_it():
    job = Job.objects.enqueue(add, (1, 2), run_at=T0, max_age=3600, unique_key="k", priority=3)
    claimed = claim_one("host:1:main", now=at(5))
    loaded = Job.objects.get(pk=job.pk)
    for field in Job._meta.concrete_fields:
        mine, orms = getattr(claimed, field.attname), getattr(loaded, field.attname)
        assert (mine, type(mine)) == (orms, type(orms)), field.name
    assert (claimed._state.adding, claimed._state.db) == (False, "default")


def test_claim_sends_post_init_while_someone_listens():
    job = Job.objects.enqueue(add, (1, 2), run_at=T0)
    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance.pk)

    signals.post_init.connect(receiver, sender=Job)
    try:
        claimed = claim_one(now=at(5))
    finally:
        signals.post_init.disconnect(receiver, sender=Job)
    assert seen == [claimed.pk] == [job.pk]


@pytest.mark.parametrize("lease", [30, 30.0, dt.timedelta(seconds=30)])
def test_claim_lease_length(lease):
    Job.objects.enqueue(add, (1, 2), run_at=T0)
    [job] = Job.objects.claim(None, "w1", now=at(5), lease=lease)
    assert job.lease_expires_at == at(35)
    assert row(job)["lease_expires_at"] == at(35)


def test_claim_lease_defaults_to_the_setting(settings):
    settings.SQLQUEUE = {**settings.SQLQUEUE, "LEASE_SECONDS": 7}
    Job.objects.enqueue(add, (1, 2), run_at=T0)
    assert claim_one(now=at(5)).lease_expires_at == at(12)


def test_claim_order_is_priority_then_run_at_then_id():
    low_first = Job.objects.enqueue(add, (1, 1), run_at=T0)
    high_late = Job.objects.enqueue(add, (1, 2), run_at=at(10), priority=5)
    low_second = Job.objects.enqueue(add, (1, 3), run_at=T0)
    high_early = Job.objects.enqueue(add, (1, 4), run_at=T0, priority=5)
    low_earliest = Job.objects.enqueue(add, (1, 5), run_at=at(-10))
    expected = [high_early, high_late, low_earliest, low_first, low_second]
    one_by_one = [claim_one(now=at(20)).pk for _ in expected]
    assert one_by_one == [j.pk for j in expected]
    Job.objects.update(status=JobStatus.QUEUED)
    assert [j.pk for j in Job.objects.claim(now=at(20), limit=10)] == [j.pk for j in expected]


def test_claim_respects_limit():
    jobs = [Job.objects.enqueue(add, (1, n), run_at=T0) for n in range(3)]
    assert Job.objects.claim(now=T0, limit=0) == []
    claimed = Job.objects.claim(now=T0, limit=2)
    assert [j.pk for j in claimed] == [jobs[0].pk, jobs[1].pk]
    assert row(jobs[2])["status"] == JobStatus.QUEUED


def test_claim_only_from_the_given_queues():
    a = Job.objects.enqueue(add, (1, 2), run_at=T0, queue="a")
    b = Job.objects.enqueue(add, (1, 2), run_at=T0, queue="b")
    c = Job.objects.enqueue(add, (1, 2), run_at=T0, queue="c")
    assert Job.objects.claim(["x"], now=T0) == []
    assert {j.pk for j in Job.objects.claim(["a", "b"], now=T0, limit=5)} == {a.pk, b.pk}
    assert [j.pk for j in Job.objects.claim("c", now=T0, limit=5)] == [c.pk]


def test_claim_waits_for_run_at():
    job = Job.objects.enqueue(add, (1, 2), run_at=at(10))
    assert Job.objects.claim(now=at(9)) == []
    assert claim_one(now=at(10)).pk == job.pk


def test_claim_on_a_filtered_queryset_claims_only_matching_jobs():
    other = Job.objects.enqueue(add, (1, 2), run_at=T0, queue="b", priority=5)
    wanted = Job.objects.enqueue(add, (1, 2), run_at=T0, queue="a")
    claimed = Job.objects.filter(queue="a").claim(now=T0)
    assert [j.pk for j in claimed] == [wanted.pk]
    assert row(other)["status"] == JobStatus.QUEUED


def test_claim_from_no_queues_claims_nothing():
    job = Job.objects.enqueue(add, (1, 2), run_at=T0)
    assert Job.objects.claim([], "w1", now=T0) == []
    assert row(job)["status"] == JobStatus.QUEUED


# ---- operator actions: retry now, run now -------------------------------------------------------
def test_retry_now_queues_finished_failures_with_one_more_attempt():
    exhausted = JobFactory(status="exhausted", attempts=3, max_attempts=3, finished_at=T0,
                           errors=[{"message": "x"}])
    expired = JobFactory(status="expired", expires_at=T0, finished_at=T0)
    waiting = JobFactory(status="failed", attempts=1, max_attempts=3,
                         run_at=T0 + dt.timedelta(hours=1))
    succeeded = JobFactory(status="succeeded", finished_at=T0)
    assert Job.objects.all().retry_now(now=T0) == 3
    exhausted.refresh_from_db()
    assert (exhausted.status, exhausted.attempts, exhausted.max_attempts) == ("queued", 3, 4)
    assert exhausted.run_at == T0 and exhausted.finished_at is None and exhausted.errors
    expired.refresh_from_db()
    assert expired.status == "queued" and expired.expires_at is None
    waiting.refresh_from_db()
    assert (waiting.status, waiting.run_at, waiting.max_attempts) == ("queued", T0, 3)
    assert Job.objects.get(pk=succeeded.pk).status == "succeeded"


def test_retry_now_skips_a_job_whose_unique_key_is_taken_again():
    old = Job.objects.enqueue(add, (1, 1), unique_key="k")
    Job.objects.filter(pk=old.pk).update(status="exhausted")
    Job.objects.enqueue(add, (1, 1), unique_key="k")  # a new holder of the key
    assert Job.objects.filter(pk=old.pk).retry_now(now=T0) == 0
    assert Job.objects.get(pk=old.pk).status == "exhausted"


def test_run_now_makes_scheduled_jobs_due():
    later = Job.objects.enqueue(add, (1, 1), run_at=T0 + dt.timedelta(days=1))
    assert Job.objects.all().run_now(now=T0) == 1
    assert [j.pk for j in Job.objects.claim(None, "w", now=T0)] == [later.pk]


def test_retry_now_requeues_only_the_newest_of_jobs_sharing_a_unique_key():
    older = JobFactory(status="exhausted", unique_key="k", finished_at=T0)
    newer = JobFactory(status="exhausted", unique_key="k", finished_at=T0)
    assert Job.objects.all().retry_now(now=T0) == 1
    assert Job.objects.get(pk=newer.pk).status == "queued"
    assert Job.objects.get(pk=older.pk).status == "exhausted"
