"""The admin tests need what tests/settings.py leaves out: the admin, sessions, messages and
static files apps, their middleware, templates and a URLconf.

They are switched on here, when pytest imports this file: that is during collection, before any
test database is created, so the test databases get the admin's tables whatever subset of the
suite runs. (The worker subprocesses of other tests use tests.settings and never need them.)
"""

import pytest
from django.conf import settings
from django.test.utils import override_settings

from tests.admin.users import make_staff

ADMIN_SETTINGS = {
    "INSTALLED_APPS": [
        *settings.INSTALLED_APPS,
        "django.contrib.admin",
        "django.contrib.sessions",
        "django.contrib.messages",
        "django.contrib.staticfiles",
    ],
    "MIDDLEWARE": [
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
    ],
    "TEMPLATES": [
        {
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "APP_DIRS": True,
            "OPTIONS": {
                "context_processors": [
                    "django.template.context_processors.request",
                    "django.contrib.auth.context_processors.auth",
                    "django.contrib.messages.context_processors.messages",
                ],
            },
        }
    ],
    "ROOT_URLCONF": "tests.admin.urls",
    "STATIC_URL": "/static/",
    "PASSWORD_HASHERS": ["django.contrib.auth.hashers.MD5PasswordHasher"],  # fast logins
}

if "django.contrib.admin" not in settings.INSTALLED_APPS:
    override_settings(**ADMIN_SETTINGS).enable()  # for the rest of the session


@pytest.fixture
def staff_user(db):
    """A staff user who may view jobs and workers, and nothing else."""
    return make_staff("viewer", "view_job", "view_worker")


@pytest.fixture
def operator(db):
    """A staff user with every job permission: view, retry, run now, cancel and delete."""
    return make_staff(
        "operator", "view_job", "view_worker", "retry_job", "run_job_now", "cancel_job",
        "delete_job",
    )
