"""``path("sqlqueue/", include("django_sqlqueue.urls"))`` serves ``sqlqueue/metrics`` and
``sqlqueue/jobs/<id>/events`` (a job's progress as server-sent events, for staff)."""

from django.urls import path

from . import views

app_name = "django_sqlqueue"
urlpatterns = [
    path("metrics", views.metrics, name="metrics"),
    path("jobs/<int:job_id>/events", views.job_events, name="job_events"),
]
