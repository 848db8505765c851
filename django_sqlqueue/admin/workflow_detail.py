"""A workflow's side of a job's page (docs/workflows.md): its workflow (a link to the workflow's
page, workflow_page.py, and to its jobs in the list), its parents and children with their states,
and, for a waiting job, what it waits for."""

from urllib.parse import urlencode

from django.urls import reverse
from django.utils.html import format_html, format_html_join

from ..models import Job, JobDependency
from ..statuses import FINISHED_STATUSES, JobStatus
from .display import status_badge

#: Children listed on a job's page at most (a chord's group job has one; a fan-out, many).
MAX_CHILDREN = 50


def workflow_detail(job, site_name: str):
    """HTML: the job's workflow (a link to the job list filtered by it), what it waits for,
    its parents and its children."""
    if job.workflow_id is None:
        return "not in a workflow"
    jobs = Job.objects.using(job._state.db)
    change = "admin:django_sqlqueue_job_change"
    edges = list(JobDependency.objects.using(job._state.db).filter(child_id=job.pk)
                 .order_by("position").values_list("parent_id", "run_anyway"))
    parents = {pk: (task, status) for pk, task, status in jobs.filter(
        pk__in=[pk for pk, _ in edges]).values_list("pk", "task_name", "status")}
    children = list(jobs.filter(parent_links__parent_id=job.pk).order_by("pk")
                    .values_list("pk", "task_name", "status")[:MAX_CHILDREN + 1])
    url = reverse("admin:django_sqlqueue_job_changelist", current_app=site_name)
    page = reverse("admin:django_sqlqueue_job_workflow", args=[job.workflow_id],
                   current_app=site_name)
    parts = [format_html('<a href="{}">workflow {}</a> (<a href="{}?{}">its jobs in the list</a>)',
                         page, job.workflow_id, url,
                         urlencode({"workflow": str(job.workflow_id)}))]
    if job.status == JobStatus.WAITING:
        unfinished = [pk for pk, _ in edges
                      if parents.get(pk, ("", JobStatus.SUCCEEDED))[1] not in FINISHED_STATUSES]
        parts.append(format_html(
            "<strong>waiting for {} of its {} parents to finish</strong>: {}",
            len(unfinished), len(edges), ", ".join(f"#{pk}" for pk in unfinished) or "-"))

    def line(pk, task, status, note=""):
        return (reverse(change, args=[pk], current_app=site_name), pk, task,
                status_badge(status), note)

    if edges:
        rows = [line(pk, *parents.get(pk, ("(deleted)", "")),
                     " runs anyway if it fails" if anyway else "") for pk, anyway in edges]
        parts.append(format_html("parents: {}", format_html_join(
            ", ", '<a href="{}">#{} {}</a> {}{}', rows)))
    if children:
        more = " and more" if len(children) > MAX_CHILDREN else ""
        parts.append(format_html("children: {}{}", format_html_join(
            ", ", '<a href="{}">#{} {}</a> {}{}',
            [line(*child) for child in children[:MAX_CHILDREN]]), more))
    return format_html_join("", "<div>{}</div>", ((part,) for part in parts))
