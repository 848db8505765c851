"""Settings of the django-sqlqueue example project: a small shop that sends receipts, charges
cards and builds reports as background jobs.

Everything that differs between machines comes from the environment (django-environ):

* ``DATABASE_URL``: default ``sqlite:///<this project's directory>/demo.sqlite3``; e.g.
  ``postgres://user:password@localhost:5432/shop`` to run against PostgreSQL.
* ``DEBUG``: default on, because this is an example to run locally, never a deployment.
* ``SECRET_KEY``, ``ALLOWED_HOSTS``.
"""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DEBUG = env.bool("DEBUG", default=True)
SECRET_KEY = env("SECRET_KEY", default="example-project-only-not-a-secret")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_sqlqueue",
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
WSGI_APPLICATION = "example_project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'demo.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # SQLite serves a queue well enough for development: WAL lets readers run while a worker
    # writes, IMMEDIATE transactions take the write lock up front (no deadlock-prone lock
    # upgrades), and the timeout makes a busy writer wait instead of failing at once.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL;",
        "transaction_mode": "IMMEDIATE",
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"

# Receipts are printed on the console instead of being sent, each in one piece even when jobs on
# several worker threads send mail at once.
EMAIL_BACKEND = "shop.mail.EmailBackend"
DEFAULT_FROM_EMAIL = "shop@example.com"

SQLQUEUE = {
    # The demo wants fast retries, so that a failing job gets through its attempts in about a
    # second. The library's defaults (5 s backoff, at least 1 s) suit real projects better.
    "BACKOFF_SECONDS": 0.5,
    "MIN_RETRY_DELAY_SECONDS": 0.5,
}

# No LOGGING for "django_sqlqueue": `manage.py runworker` then prints one line per job outcome on
# its output (-v 2 adds debug lines, -v 0 silences them), which `manage.py demo` shows. A project
# that configures the "django_sqlqueue" logger itself gets these lines through its own handlers.
