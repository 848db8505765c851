"""The export page: a button starts a job, and a progress bar follows it to its end.

The page's own event stream (``export_events``) makes the shop's check, that the job is one this
visitor started, then hands over to ``stream_job_events``: no staff permission needed, and no
one can follow a job that is not theirs.
"""

from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from django_sqlqueue.views import stream_job_events

from .tasks import export_catalogue

#: Where the session keeps the ids of the exports its visitor started.
SESSION_KEY = "export_job_ids"


@require_http_methods(["GET", "POST"])
def export_page(request):
    """GET: the page. POST (its button): start an export, answer its id and its events' URL."""
    if request.method == "GET":
        return render(request, "shop/export.html")
    job = export_catalogue.enqueue()
    request.session[SESSION_KEY] = [*request.session.get(SESSION_KEY, [])[-9:], job.pk]
    return JsonResponse({"id": job.pk, "events": reverse("export-events", args=[job.pk])})


@require_GET
def export_events(request, job_id):
    """The export's progress as server-sent events, for the visitor who started it only."""
    if job_id not in request.session.get(SESSION_KEY, []):
        raise Http404("no such export")
    return stream_job_events(job_id, include_result=True)
