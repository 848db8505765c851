"""The URLs the test web servers serve: ``ping`` (answers while the embedded worker drains jobs)
and ``django_sqlqueue.urls`` (the health views among them)."""

import os

from django.http import JsonResponse
from django.urls import include, path

from django_sqlqueue.models import Job


def ping(request):
    """How many jobs are left, and which process answered: a request that reads the database,
    as a page would."""
    return JsonResponse({"unfinished": Job.objects.unfinished().count(), "pid": os.getpid()})


urlpatterns = [
    path("ping", ping),
    path("sqlqueue/", include("django_sqlqueue.urls")),
]
