"""The site's jobs, imported by django_sqlqueue at start-up (an app's tasks.py)."""

from django_sqlqueue import job, schedule


@job
def write_note(text):
    from .models import Note

    return {"note": Note.objects.create(text=text).pk}


@job(max_attempts=1)
def fail_on_purpose(reason):
    """Fails at once, with no retry: its job page shows the error and its traceback."""
    raise RuntimeError(reason)


@schedule(every=1, name="install-check-tick")
@job
def tick():
    """Enqueued every second by whichever worker runs: the schedules page shows it."""
    return "tick"
