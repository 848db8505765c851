from django.contrib.auth.models import Permission, User


def make_staff(username, *codenames):
    """A staff user with the given permissions of django_sqlqueue (e.g. "view_job")."""
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="django_sqlqueue", codename__in=codenames)
    )
    return user
