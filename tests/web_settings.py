"""The suite's settings, serving HTTP: for the web servers of tests/process/test_embedded_worker.py
and the health views."""

from tests.settings import *  # noqa: F403

ROOT_URLCONF = "tests.testapp.web"
ALLOWED_HOSTS = ["*"]
