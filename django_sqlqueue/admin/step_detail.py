"""The steps of a job's page (docs/steps.md): its durable steps in the order they completed,
each with its result, the attempt that completed it, when it started and finished, and how long
it took."""

import json

from django.template.loader import render_to_string

from ..models import JobStep
from ..observability.durations import seconds_text
from .display import absolute

#: Steps listed on a job's page at most (a job that takes a step per item of a list may have
#: thousands).
MAX_STEPS = 200


def steps_detail(job) -> str:
    """HTML: a table of the job's recorded steps, or a line saying it has none."""
    rows = list(JobStep.objects.using(job._state.db).filter(job_id=job.pk).order_by("pk")
                .values_list("name", "result", "attempt", "started_at", "finished_at",
                             "duration_seconds")[:MAX_STEPS + 1])
    return render_to_string("admin/django_sqlqueue/job/steps.html", {
        "steps": [
            {"name": name, "attempt": attempt,
             "result": json.dumps(result, sort_keys=True, ensure_ascii=False, default=str),
             "started": absolute(started_at) if started_at else "-",
             "finished": absolute(finished_at) if finished_at else "-",
             "duration": seconds_text(duration) if duration is not None else "-"}
            for name, result, attempt, started_at, finished_at, duration in rows[:MAX_STEPS]
        ],
        "more": len(rows) > MAX_STEPS, "max_steps": MAX_STEPS,
    })
