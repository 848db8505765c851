"""A project that uses the package without ``django_sqlqueue`` in INSTALLED_APPS gets one error
that names the fix, where it first uses it: the ``@job`` decorator, the models, the django.tasks
backend (Django's own LookupError and RuntimeError did not say what to add)."""

import os
import subprocess
import sys
import textwrap

import pytest

from tests.process.conftest import ROOT

FIX = "add 'django_sqlqueue' to INSTALLED_APPS"

SETTINGS = """
SECRET_KEY = "not-installed"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
TASKS = {"default": {"BACKEND": "django_sqlqueue.backend.SQLQueueBackend"}}
USE_TZ = True
"""

USES = {
    "job": """
        from django_sqlqueue import job

        @job
        def send(): pass
    """,
    "models": "from django_sqlqueue.models import Job",
    "backend": """
        from django.tasks import task

        @task
        def send(): pass

        send.enqueue()
    """,
}


@pytest.mark.parametrize("use", list(USES))
def test_a_project_without_the_app_is_told_to_add_it(tmp_path, use):
    if use == "backend":
        pytest.importorskip("django.tasks")
    (tmp_path / "site_settings.py").write_text(SETTINGS)
    script = "import django\ndjango.setup()\n" + textwrap.dedent(USES[use])
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "site_settings",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: "), done.stderr
    assert FIX in last, done.stderr
