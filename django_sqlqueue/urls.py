"""``path("sqlqueue/", include("django_sqlqueue.urls"))`` serves ``sqlqueue/metrics``,
``sqlqueue/health/live`` and ``sqlqueue/health/ready`` (an orchestrator's probes) and
``sqlqueue/jobs/<id>/events`` (a job's progress as server-sent events, for staff)."""

from django.urls import path

from . import views

app_name = "django_sqlqueue"
urlpatterns = [
    path("metrics", views.metrics, name="metrics"),
    path("health/live", views.health_live, name="health_live"),
    path("health/ready", views.health_ready, name="health_ready"),
    path("jobs/<int:job_id>/events", views.job_events, name="job_events"),
]
