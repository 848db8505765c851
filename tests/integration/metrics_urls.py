"""The URL include a project adds to serve the queue-level metrics (docs/observability.md)."""

from django.urls import include, path

urlpatterns = [path("sqlqueue/", include("django_sqlqueue.urls"))]
