"""The workflow page of the job admin (docs/workflows.md#in-the-admin): a workflow's jobs in
layers (workflow_graph.py), and its two actions, each confirmed first:

- **Cancel workflow**: ``cancel()`` of its unfinished jobs, as the list's cancel action (running
  ones are asked to stop; the user is recorded as who asked).
- **Retry failed jobs**: ``retry_now()`` of its jobs that failed (exhausted, expired, or failed
  and waiting for a retry), as the list's retry action: the jobs their end had cancelled go back
  to waiting (``transitions.settle.resume``).

Both go through ``actions.perform``, so they are logged and reported as the list's actions are.
"""

import logging
import uuid
from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from ..statuses import UNFINISHED_STATUSES, JobStatus
from . import actions, workflow_graph
from .display import (
    BREADCRUMBS_AS_LIST,
    STATUS_COLOURS,
    breakable,
    status_badge,
    status_label,
)

logger = logging.getLogger("django_sqlqueue.admin")

#: What each action of the page does: (the operation, its permission check, the statuses of
#: the workflow's jobs it is offered for, its button, its confirmation's question).
RETRIED_STATUSES = (JobStatus.EXHAUSTED, JobStatus.EXPIRED, JobStatus.FAILED)
WORKFLOW_ACTIONS = {
    "cancel": (actions.CANCEL, "has_cancel_permission", UNFINISHED_STATUSES, "Cancel workflow",
               "Cancel the {n} unfinished job{s} of this workflow?"),
    "retry": (actions.RETRY, "has_retry_permission", RETRIED_STATUSES, "Retry failed jobs",
              "Retry the {n} failed job{s} of this workflow now?"),
}


def _urls(model_admin):
    site = model_admin.admin_site.name
    return (lambda pk: reverse("admin:django_sqlqueue_job_change", args=[pk], current_app=site),
            reverse("admin:django_sqlqueue_job_changelist", current_app=site))


def _node(node, job_url) -> dict:
    parents = node.parents
    if len(parents) <= workflow_graph.MAX_PARENTS_NAMED:
        after = ", ".join(f"#{pk}" for pk in parents)
    else:
        after = f"{len(parents)} jobs"
    reason = node.reason
    if node.cancelled_by_parent is not None:
        reason = format_html('parent <a href="{}">#{}</a> {}', job_url(node.cancelled_by_parent),
                             node.cancelled_by_parent, reason.split(" ", 2)[2])
    return {"pk": node.pk, "url": job_url(node.pk), "task": breakable(node.task_name),
            "badge": status_badge(node.status), "colour": STATUS_COLOURS.get(node.status, "#555"),
            "attempts": f"{node.attempts} of {node.max_attempts}", "after": after,
            "reason": reason, "blocked": node.status in (JobStatus.WAITING, JobStatus.CANCELLED)}


def _counts(counts, list_url, workflow_id) -> list:
    return [{"badge": status_badge(status), "n": n, "label": status_label(status),
             "url": f"{list_url}?" + urlencode({"workflow": str(workflow_id),
                                                "status__exact": status})}
            for status, n in counts]


def _available(model_admin, request, graph) -> list:
    offered = []
    for name, (_, permission, statuses, label, _) in WORKFLOW_ACTIONS.items():
        if getattr(model_admin, permission)(request) and graph.count(*statuses):
            offered.append((name, label))
    return offered


def url_of_filter(model_admin, request) -> str | None:
    """The workflow page of the workflow the job list is filtered by, if it is one."""
    try:
        workflow_id = uuid.UUID(request.GET.get("workflow", ""))
    except ValueError:
        return None
    return reverse("admin:django_sqlqueue_job_workflow", args=[workflow_id],
                   current_app=model_admin.admin_site.name)


def render(model_admin, request, workflow_id):
    """The page: the workflow's counts by status, its layers, and the actions the user may
    take on it."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    graph = workflow_graph.read(workflow_id, model_admin.get_queryset(request).db)
    if graph is None:
        raise Http404(f"No job is in workflow {workflow_id}.")
    job_url, list_url = _urls(model_admin)
    layers = [{"depth": layer.depth, "size": layer.size, "collapsed": layer.collapsed,
               "counts": _counts(layer.counts, list_url, workflow_id),
               "nodes": [_node(node, job_url) for node in layer.nodes]}
              for layer in graph.layers]
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Workflow {workflow_id}", "opts": model_admin.opts,
        "breadcrumbs_as_list": BREADCRUMBS_AS_LIST, "graph": graph, "layers": layers,
        "counts": _counts(graph.counts, list_url, workflow_id),
        "list_url": f"{list_url}?{urlencode({'workflow': str(workflow_id)})}",
        "workflow_actions": _available(model_admin, request, graph),
        "max_nodes": workflow_graph.MAX_NODES_PER_LAYER,
    }
    return TemplateResponse(request, "admin/django_sqlqueue/job/workflow.html", context)


def act(model_admin, request, workflow_id, name):
    """POST only: without ``post=yes`` the confirmation; with it, the action, then back to the
    page with its messages."""
    if name not in WORKFLOW_ACTIONS:
        raise Http404(f"No workflow action {name!r}.")
    operation, permission, statuses, label, question = WORKFLOW_ACTIONS[name]
    if not getattr(model_admin, permission)(request):
        raise PermissionDenied
    jobs = model_admin.get_queryset(request).filter(workflow_id=workflow_id,
                                                    status__in=statuses)
    page = reverse("admin:django_sqlqueue_job_workflow", args=[workflow_id],
                   current_app=model_admin.admin_site.name)
    if request.POST.get("post") == "yes":
        changed = actions.perform(model_admin, request, jobs, operation)
        logger.info("admin action=%s_workflow user=%s workflow=%s changed=%s", name,
                    request.user.get_username(), workflow_id, changed)
        return HttpResponseRedirect(page)
    counts = actions.counts_by_status(jobs)
    total = sum(counts.values())
    context = {
        **model_admin.admin_site.each_context(request),
        "title": label, "opts": model_admin.opts, "breadcrumbs_as_list": BREADCRUMBS_AS_LIST,
        "workflow_title": f"Workflow {workflow_id}", "page_url": page, "action": name,
        "label": label, "submit": f"Yes, {label.lower()}",
        "question": question.format(n=total, s="" if total == 1 else "s"), "total": total,
        "counts": actions.describe_counts(counts), "running": counts.get(JobStatus.RUNNING, 0),
        "sample": jobs.order_by("pk").only("pk", "task_name", "status")[:10],
    }
    return TemplateResponse(request, "admin/django_sqlqueue/job/workflow_confirm.html", context)
