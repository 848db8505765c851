"""``manage.py schedules``: the list (a table or JSON), --sync, --pause, --resume, --run-now."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from django_sqlqueue import schedule
from django_sqlqueue.models import Job, Schedule
from tests.testapp.tasks import add, send_email

pytestmark = pytest.mark.django_db


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("schedules", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def declared(declared_schedules):
    schedule(cron="@daily", timezone="Asia/Tokyo", name="daily")(send_email)
    schedule(every=30, name="half-minute", args=[1, 2])(add)


def test_an_empty_table_says_how_to_get_schedules(declared_schedules):
    out, _ = run()
    assert out.startswith("no schedules: declare them with @schedule")


def test_sync_then_list_as_a_table_and_as_json(declared):
    out, err = run("--sync")
    assert err == "synced: 2 created, 0 unchanged\n"
    header, daily, often = out.splitlines()
    assert header.split() == ["NAME", "STATE", "WHEN", "TIME", "ZONE", "NEXT", "RUN", "LAST",
                              "RUN"]
    assert daily.startswith("daily ") and "At 00:00 every day (@daily)" in daily
    assert "Asia/Tokyo" in daily and "+09:00" in daily and daily.endswith("never")
    assert often.startswith("half-minute") and "Every 30 seconds" in often
    items = json.loads(run("--json")[0])
    assert [item["name"] for item in items] == ["daily", "half-minute"]
    assert items[0]["timezone"] == "Asia/Tokyo" and len(items[0]["next_runs"]) == 5
    assert all(run_at.endswith("T00:00:00+09:00") for run_at in items[0]["next_runs"])
    assert items[1] | {"next_runs": None} == {
        "name": "half-minute", "source": "code", "task": "tests.testapp.tasks.add",
        "state": "active",
        "description": "Every 30 seconds", "cron": None, "every_seconds": 30, "timezone": None,
        "args": [1, 2], "kwargs": {}, "next_runs": None, "problem": None, "last_run_at": None,
        "last_job": None, "last_enqueued_by": None, "runs": 0, "missed": "latest",
        "catch_up": 1, "grace_seconds": 60.0, "skipped_ticks": 0, "last_skipped_at": None,
        "paused_at": None, "paused_by": None, "retired_at": None,
    }


def test_pause_resume_and_run_now_by_name(declared):
    run("--sync")
    _, err = run("--pause", "daily", "--pause", "half-minute")
    assert err == "daily: paused\nhalf-minute: paused\n"
    assert set(Schedule.objects.values_list("paused_by", flat=True)) == {"manage.py schedules"}
    out, err = run("--resume", "daily", "--run-now", "half-minute")
    job = Job.objects.get()
    assert err == f"daily: resumed\nhalf-minute: enqueued job #{job.pk}\n"
    assert f"queued (#{job.pk})" in out and "(once resumed)" in out
    assert job.args == [1, 2] and job.schedule_name == "half-minute"
    with pytest.raises(CommandError, match="no schedule named 'nope' \\(schedules: daily, "):
        run("--pause", "nope")


def test_retired_schedules_are_listed_with_all(declared, declared_schedules):
    run("--sync")
    declared_schedules.pop("daily")
    out, err = run("--sync")
    assert err == "synced: 1 retired, 1 unchanged\n"
    assert "daily" not in out
    out, _ = run("--all")
    assert "retired" in out.splitlines()[1]
    with pytest.raises(CommandError, match="retired"):
        run("--run-now", "daily")


def test_schedules_declared_but_not_synced_are_listed_as_such(declared):
    # A new @schedule showed only once a worker had started and synced it.
    out, err = run()
    header, daily, often = out.splitlines()
    assert daily.startswith("daily ") and "not synced" in daily and daily.endswith("never")
    assert "(once synced)" in daily
    assert often.startswith("half-minute") and "not synced" in often
    assert err.startswith("2 schedule(s) declared in this code are not synced yet")
    items = json.loads(run("--json")[0])
    assert [(item["name"], item["state"], item["last_job"]) for item in items] == [
        ("daily", "not synced", None), ("half-minute", "not synced", None)]
    with pytest.raises(CommandError, match="'daily' is declared but not synced yet: run "
                                           "manage.py schedules --sync"):
        run("--run-now", "daily")
    assert not Schedule.objects.exists()  # listing writes nothing
    run("--sync")
    out, err = run()
    assert "not synced" not in out and err == ""
