from django.contrib import admin
from django.urls import include, path
from shop import views

urlpatterns = [
    path("admin/", admin.site.urls),
    # A page that starts a job and follows its progress (docs/progress.md).
    path("exports/", views.export_page, name="export"),
    path("exports/<int:job_id>/events", views.export_events, name="export-events"),
    # The app's own views: sqlqueue/jobs/<id>/events for staff (and sqlqueue/metrics).
    path("sqlqueue/", include("django_sqlqueue.urls")),
]
