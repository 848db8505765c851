"""The queue dashboard's row in the admin index: the admin of a proxy model (QueueDashboard)
whose list is a redirect to the dashboard, shown to whoever may view jobs."""

from django.contrib import admin
from django.http import HttpResponseRedirect
from django.urls import reverse


class QueueDashboardAdmin(admin.ModelAdmin):
    def has_view_permission(self, request, obj=None):
        return request.user.has_perm("django_sqlqueue.view_job")

    def has_module_permission(self, request):
        return self.has_view_permission(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        return HttpResponseRedirect(
            reverse("admin:django_sqlqueue_job_dashboard", current_app=self.admin_site.name))
