"""What the job and schedule admins share: a permission per operator action, their own change
list, their list actions offered again as buttons on an object's page, and timestamp fields.

A button POSTs to ``<id>/act/<action>/``, which runs the list's action of that name on that one
object, behind the same permission as in the list (``ModelAdmin.get_actions``), then goes back
to the object's page. A button is shown only where its action applies (``page_action_applies``).
"""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from .display import when


def when_field(field: str, description: str):
    """A field of an admin's page: the timestamp ``field``, and how far it is from now."""

    @admin.display(description=description)
    def shown(self, row):
        return when(getattr(row, field))

    return shown


class PageActionsMixin:
    #: The list's actions offered as buttons on an object's page, {name: label}, in order.
    page_actions: dict = {}
    #: The admin's own change list (``get_changelist``).
    changelist_class = None

    def _has(self, request, codename) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.{codename}")

    def get_changelist(self, request, **kwargs):
        return self.changelist_class or super().get_changelist(request, **kwargs)

    def page_action_applies(self, obj, action: str) -> bool:
        """Whether the button of ``action`` is shown on ``obj``'s page (all, unless told)."""
        return True

    def change_view(self, request, object_id, form_url="", extra_context=None):
        available = self.get_actions(request)
        obj = self.get_object(request, object_id)
        buttons = [(name, label) for name, label in self.page_actions.items()
                   if obj is not None and name in available
                   and self.page_action_applies(obj, name)]
        return super().change_view(
            request, object_id, form_url, {**(extra_context or {}), "page_actions": buttons})

    def get_urls(self):
        name = f"{self.opts.app_label}_{self.opts.model_name}_act"
        return [
            path("<path:object_id>/act/<str:action>/",
                 self.admin_site.admin_view(require_POST(self.page_action_view)), name=name),
            *super().get_urls(),
        ]

    def page_action_view(self, request, object_id, action):
        """A button on an object's page: the same action as in the list, for this object."""
        if action not in self.page_actions:
            raise PermissionDenied
        available = self.get_actions(request)
        if action not in available:
            raise PermissionDenied
        obj = self.get_object(request, object_id)
        if obj is None:
            raise Http404(f"No {self.opts.model_name} with id {object_id!r}.")
        entry = available[action]  # an Action on Django 6.1+, a (func, name, text) tuple before
        func = entry.func if hasattr(entry, "func") else entry[0]
        func(self, request, self.get_queryset(request).filter(pk=obj.pk))
        return HttpResponseRedirect(
            reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change",
                    args=[obj.pk], current_app=self.admin_site.name)
        )
