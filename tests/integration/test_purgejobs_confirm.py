"""``purgejobs`` deletes for good: it refuses a duration without a unit, says what it will delete
(by status and queue), asks on a terminal, and off a terminal deletes only with --noinput."""

import datetime as dt
import io

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db(transaction=True)


class Terminal(io.StringIO):
    """Standard input on a terminal, with the user's answer typed in."""

    def isatty(self):
        return True


def finished(status, *, queue="default", days=10):
    job = Job.objects.enqueue(add, (1, 1), queue=queue)
    Job.objects.filter(pk=job.pk).update(
        status=status, finished_at=timezone.now() - dt.timedelta(days=days))
    return job


def purge(*args, **options):
    out = io.StringIO()
    call_command("purgejobs", *args, stdout=out, **options)
    return out.getvalue()


def test_a_bare_number_is_refused_naming_the_units():
    finished(JobStatus.SUCCEEDED, days=1)
    for args in (["--older-than", "3"], ["--older-than", "3", "--noinput"],
                 ["--older-than", "3", "--dry-run"]):
        with pytest.raises(CommandError) as info:
            purge(*args)
        assert "'3' has no unit" in str(info.value)
        assert "3s, 3m, 3h, 3d or 3w" in str(info.value)
    assert Job.objects.count() == 1


def test_off_a_terminal_it_says_what_it_would_delete_and_asks_for_noinput(monkeypatch):
    finished(JobStatus.SUCCEEDED, queue="emails")
    finished(JobStatus.SUCCEEDED, queue="emails")
    finished(JobStatus.EXHAUSTED, queue="reports")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # cron: no terminal
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"add --noinput \(or --no-input\)"):
        call_command("purgejobs", "--older-than", "7d", stdout=out)
    assert out.getvalue().splitlines()[0].startswith("will delete 3 job(s) finished before")
    assert out.getvalue().splitlines()[1:] == ["  queue emails: succeeded 2",
                                               "  queue reports: exhausted 1"]
    assert Job.objects.count() == 3
    assert "deleted 3 job(s)" in purge("--older-than", "7d", "--no-input")
    assert not Job.objects.exists()


@pytest.mark.parametrize("answer, left", [("no\n", 1), ("\n", 1), ("yes\n", 0)])
def test_on_a_terminal_it_asks_first(monkeypatch, answer, left):
    finished(JobStatus.CANCELLED)
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    output = purge("--older-than", "1w")
    assert "will delete 1 job(s)" in output and "queue default: cancelled 1" in output
    assert ("purge cancelled: nothing deleted" in output) == bool(left)
    assert Job.objects.count() == left


def test_yes_skips_the_question_and_nothing_to_delete_says_so():
    finished(JobStatus.SUCCEEDED)
    assert purge("--older-than", "30d", "--yes").startswith("nothing to delete: no job")
    assert "deleted 1 job(s)" in purge("--older-than", "30m", "--yes")
