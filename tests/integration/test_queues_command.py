"""``manage.py queues``: list, pause, resume, limit."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from django_sqlqueue.models import Job, Queue
from tests.testapp.tasks import add, send_email

pytestmark = pytest.mark.django_db(transaction=True)


def queues(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("queues", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_pause_lists_and_resumes():
    send_email.enqueue("x@example.com")
    out, err = queues("pause", "emails")
    assert "emails: paused since" in err and "by manage.py queues" in err
    assert Job.objects.claim(None, "w") == []
    line = next(line for line in out.splitlines() if line.startswith("emails"))
    assert "paused" in line and line.rstrip().endswith("paused")
    _, err = queues("resume", "emails")
    assert err.strip() == "emails: resumed"
    assert len(Job.objects.claim(None, "w")) == 1


def test_limit_sets_and_clears_limits():
    _, err = queues("limit", "default", "--concurrency", "5", "--rate", "100", "--period", "60",
                    "--key-concurrency", "1")
    assert err.strip() == ("default: limits 5 running, 100 starts per 60 s; "
                           "per key: 1 running")
    queues("limit", "default", "--rate", "none")
    row = Queue.objects.get(name="default")
    assert (row.concurrency_limit, row.rate_limit, row.key_concurrency_limit) == (5, None, 1)
    add.enqueue(1, 1)
    (state,) = json.loads(queues("--json")[0])
    assert state["limits"] == "5 running; per key: 1 running" and state["ready"] == 1


def test_bad_input_names_the_fix():
    with pytest.raises(CommandError, match="whole number or 'none'"):
        queues("limit", "default", "--concurrency", "five")
    with pytest.raises(CommandError, match="give at least one limit"):
        queues("limit", "default")
    with pytest.raises(CommandError, match="invalid queue name"):
        queues("pause", "no spaces")
    with pytest.raises(CommandError, match="above 0"):
        queues("limit", "default", "--rate", "3", "--period", "0")


def test_fair_sets_weights_and_turns_off():
    _, err = queues("fair", "default", "--weight", "gold=3", "--weight", "none=0.5")
    assert err.strip() == "default: limits fair shares per key (weights (no key)=0.5, gold=3)"
    queues("fair", "default", "--off")
    row = Queue.objects.get(name="default")
    assert (row.fair, row.key_weights) == (False, {"gold": 3, "": 0.5})  # kept for later
    queues("fair", "default", "--no-weights")
    row.refresh_from_db()
    assert (row.fair, row.key_weights) == (True, {})
    with pytest.raises(CommandError, match="a weight is KEY=N"):
        queues("fair", "default", "--weight", "gold")
    with pytest.raises(CommandError, match="above 0"):
        queues("fair", "default", "--weight", "gold=-1")


def test_a_queue_nothing_uses_is_refused_unless_created():
    # A typo once created a paused queue of its own, and the real one went on.
    send_email.enqueue("x@example.com")
    for args in (["pause", "emials"], ["limit", "emials", "--concurrency", "1"],
                 ["fair", "emials"]):
        with pytest.raises(CommandError) as info:
            queues(*args)
        message = str(info.value)
        assert message.startswith("no queue named 'emials' (did you mean 'emails'?)")
        assert "add --create to" in message
    assert not Queue.objects.exists()
    _, err = queues("pause", "nightly", "--create")
    assert "nightly: paused since" in err
    assert Queue.objects.get(name="nightly").is_paused
    # Known already: a row (nightly), ready jobs (emails), a task's default queue (default).
    queues("pause", "nightly", "emails", "default")
    assert Queue.objects.filter(paused_at__isnull=False).count() == 3
