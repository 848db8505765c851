"""The sections of a job's page, chosen for the job: a failed or exhausted job's error comes
first (its type, message and traceback, where Flower and django-rq put it: an operator opens the
page to see what went wrong), and a field that is empty or beside the point for this job is left
out (no progress reported: no progress row; not transactional: no red cross; no unique key: no
unique fields), so that what matters is above the fold on a laptop."""

from django.template.loader import render_to_string
from django.utils.dateparse import parse_datetime

from ..statuses import JobStatus
from .display import short_type, when

#: The statuses whose page opens with the last error.
FAILED = (JobStatus.FAILED, JobStatus.EXHAUSTED)

#: Every section, every field; ``fieldsets`` leaves out what a job does not need.
FIELDSETS = (
    (None, {"fields": (
        "status_badge", "progress_bar", "task_name", "queue", "priority", "transactional",
        "unique_key", "unique_slot", "tags_list", "worker_detail", "cancel_detail",
    )}),
    ("Workflow", {"fields": ("workflow",)}),
    ("Attempts", {"fields": ("attempts_of_max", "retry_policy", "errors_list")}),
    ("Steps", {"fields": ("steps_list",)}),
    ("Payload and result", {"fields": ("payload_json", "metadata_json", "result_json")}),
    ("Timings", {"fields": (
        "enqueued", "due", "claimed", "finished", "duration", "waited", "expires",
        "timeout_seconds", "lease_expires", "claim_token",
    )}),
)


def error_time(text) -> str:
    """An error entry's ``at``, as the page writes times."""
    try:
        at = parse_datetime(text) if isinstance(text, str) else None
    except ValueError:
        at = None
    return when(at) if at else "unknown time"


def last_error(job) -> dict | None:
    """The job's last recorded error (a dict of errors' entries), or None."""
    entries = [entry for entry in (job.errors or []) if isinstance(entry, dict)]
    return entries[-1] if entries else None


def hidden_fields(job) -> set:
    """The fields with nothing to say about ``job``."""
    empty = {
        "progress_bar": job.progress is None,
        "transactional": not job.transactional,
        "unique_key": not job.unique_key,
        "unique_slot": not job.unique_slot,
        "tags_list": not job.tags,
        "cancel_detail": job.cancel_requested_at is None and job.status != JobStatus.CANCELLED,
        "workflow": job.workflow_id is None,
        "metadata_json": job.metadata is None,
        "result_json": job.result is None,
        "expires": job.expires_at is None,
        "lease_expires": job.lease_expires_at is None,
        "claim_token": not job.claim_token,
        "timeout_seconds": job.timeout_seconds is None,
    }
    return {name for name, hide in empty.items() if hide}


def fieldsets(job) -> list:
    """The page's sections for ``job`` (every one for the add form, which no one sees)."""
    if job is None:
        return list(FIELDSETS)
    hidden = hidden_fields(job)
    sections = []
    if job.status in FAILED and last_error(job) is not None:
        sections.append(("Last error", {"fields": ("last_error_detail",)}))
    for title, options in FIELDSETS:
        fields = tuple(name for name in options["fields"] if name not in hidden)
        if fields:
            sections.append((title, {**options, "fields": fields}))
    return sections


def last_error_detail(job) -> str:
    """HTML: the last error's type, message, attempt, time and worker, and its traceback,
    open."""
    entry = last_error(job)
    if entry is None:
        return "-"
    return render_to_string("admin/django_sqlqueue/job/last_error.html", {
        "error": {**entry, "short_type": short_type(entry.get("type", "")),
                  "at_display": error_time(entry.get("at"))},
        "job": job,
    })
