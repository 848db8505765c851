"""instances.new_instance skips Model.__init__ for speed; it must build the very instance that
Django builds, on every supported Django version (a pin on Django's internals: ModelState)."""

import datetime as dt
import uuid

from django.utils import timezone

from django_sqlqueue.db.instances import attnames, builds_directly, new_instance
from django_sqlqueue.models import Job

STATE = ("adding", "db", "fields_cache")  # what ModelState holds, per Django 5.2 to 6.1


def state(instance) -> dict:
    assert set(vars(instance._state)) <= set(STATE), "ModelState changed: review instances.py"
    return {name: getattr(instance._state, name) for name in STATE}


def values():
    now = timezone.now()
    return {
        "id": 7, "task_name": "tests.testapp.tasks.add", "queue": "default",
        "payload": {"args": [1, 2], "kwargs": {}}, "priority": 0, "status": "running",
        "attempts": 1, "max_attempts": 5, "interruptions": 0, "max_interruptions": 3,
        "retry_backoff_seconds": 5.0,
        "retry_min_delay_seconds": 1.0, "retry_max_delay_seconds": 3600.0, "retry_jitter": 0.1,
        "enqueued_at": now, "run_at": now, "expires_at": None, "timeout_seconds": None,
        "claimed_at": now, "finished_at": None, "claimed_by": "w", "claim_token": uuid.uuid4(),
        "lease_expires_at": now + dt.timedelta(seconds=30), "cancel_requested_at": None,
        "cancelled_by": None, "result": None, "errors": [], "unique_key": None,
        "unique_slot": "k@2026-11-26T02:05:00+00:00", "unique_states": 15,
        "tags": ["billing"], "metadata": {"by": "cron"}, "concurrency_key": "",
        "trace_context": {"traceparent": f"00-{'1' * 32}-{'2' * 16}-01"},
        "workflow_id": None, "parents_pending": 0,
        "progress_done": 3, "progress_total": 10, "progress_message": "m", "progress_at": now,
        "transactional": False, "awaited": False,
    }


def test_an_instance_built_directly_is_the_one_django_builds():
    attrs = values()
    assert set(attrs) == set(attnames(Job)), "Job's fields changed: update this test"
    assert builds_directly(Job)  # nothing listens to pre_init/post_init here
    direct = new_instance(Job, dict(attrs), db="default", adding=False)
    django_made = Job.from_db("default", list(attrs), list(attrs.values()))
    assert type(direct._state) is type(django_made._state)
    assert state(direct) == state(django_made)
    assert {k: v for k, v in vars(direct).items() if k != "_state"} == {
        k: v for k, v in vars(django_made).items() if k != "_state"}
    assert direct.get_deferred_fields() == django_made.get_deferred_fields() == set()
    assert direct.pk == 7 and direct._state.adding is False and direct._state.db == "default"


def test_a_new_unsaved_instance_matches_the_constructor():
    attrs = values()
    attrs["id"] = None
    direct = new_instance(Job, dict(attrs))
    constructed = Job(**attrs)
    assert state(direct) == state(constructed)
    assert {k: v for k, v in vars(direct).items() if k != "_state"} == {
        k: v for k, v in vars(constructed).items() if k != "_state"}
