"""The fresh site the docs' snippets run in (tests/docs/test_snippets.py): what `startproject`
gives, the admin included, plus django_sqlqueue and an empty ``shop`` app whose files the pages
write, as a reader would. SQLite as docs/getting-started.md recommends it; PostgreSQL (a
throwaway cluster, tests/conftest.py) with SQLQUEUE_TEST_DATABASE=postgresql.

The aliases that pages name besides "default" (``orders`` and ``shop`` for business data,
``jobs`` for the queue's tables, ``direct`` for a LISTEN around a pooler, ``bulk_jobs`` for a
second primary, ``replica`` for a standby) are test mirrors of it: the same database under
another name, so that ``transaction.atomic(using="orders")`` runs as written."""

import os
import sys

import django

from tests.settings import SCRATCH, VENDOR

# The site's own directory, as `startproject` would make it: the pages write shop/*.py here.
BASE_DIR = SCRATCH / f"docs-site-{os.getpid()}"
(BASE_DIR / "shop").mkdir(parents=True, exist_ok=True)
for name, text in {"shop/__init__.py": "", "shop/models.py": "", "urls.py": "urlpatterns = []\n"
                   }.items():
    (BASE_DIR / name).write_text(text)
sys.path.insert(0, str(BASE_DIR))

if VENDOR == "sqlite":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": BASE_DIR / "db.sqlite3",
            "OPTIONS": {  # docs/getting-started.md's
                "init_command": "PRAGMA journal_mode=WAL;",
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
            },
            "TEST": {"NAME": str(BASE_DIR / "test-db.sqlite3")},
        }
    }
elif VENDOR == "postgresql":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "shop",
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": "",  # set by the throwaway cluster fixture in tests/conftest.py
        }
    }
else:
    raise RuntimeError(f"the docs' snippets run on sqlite and postgresql, not {VENDOR!r}")
for alias in ("orders", "shop", "jobs", "direct", "bulk_jobs", "replica"):
    DATABASES[alias] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django_sqlqueue",
    "shop",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
ROOT_URLCONF = "urls"
SECRET_KEY = "docs-tests-only"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
SQLQUEUE = {}
if django.VERSION >= (6, 0):  # docs/django-tasks.md: django.tasks through the queue
    TASKS = {"default": {"BACKEND": "django_sqlqueue.backend.SQLQueueBackend"}}
