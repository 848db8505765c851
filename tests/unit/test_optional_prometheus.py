"""Without prometheus_client (no ``[prometheus]`` extra) everything but metrics works: every
module imports, jobs are enqueued and run by ``runworker``, and asking for metrics fails with an
error that names the extra to install."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    os.environ.get("SQLQUEUE_TEST_DATABASE", "postgresql") != "sqlite",
    reason="one run is enough: the database plays no part; runs in the sqlite pass",
)

WITHOUT_PROMETHEUS_CLIENT = """
import importlib, pkgutil, sys

class NoPrometheusClient:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "prometheus_client":
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)")

sys.meta_path.insert(0, NoPrometheusClient())
for name in [m for m in sys.modules if m.split(".")[0] == "prometheus_client"]:
    del sys.modules[name]

import django
django.setup()
import django_sqlqueue

def import_all(path, prefix):
    for module in pkgutil.iter_modules(path, prefix):
        if module.name == "django_sqlqueue.backend" and django.VERSION < (6, 0):
            continue  # django.tasks is Django 6's
        if module.name == "django_sqlqueue.admin":
            continue  # needs django.contrib.admin, which these settings leave out
        imported = importlib.import_module(module.name)
        if module.ispkg:
            import_all(imported.__path__, module.name + ".")

import_all(django_sqlqueue.__path__, "django_sqlqueue.")

from django.core.management import CommandError, call_command
from django.test import RequestFactory
call_command("migrate", verbosity=0)
from django_sqlqueue.exceptions import PrometheusClientMissing
from django_sqlqueue.models import Job
from django_sqlqueue.views import metrics
from tests.testapp.tasks import add

Job.objects.bulk_enqueue(add.prepare(n, 1) for n in range(20))
try:
    call_command("runworker", "--burst", verbosity=0)
except SystemExit as exit_:
    print("runworker --burst exited with", exit_.code)
print("succeeded:", Job.objects.filter(status="succeeded").count())
try:
    call_command("runworker", "--metrics-port", "9100")
except CommandError as exc:
    print("runworker:", exc)
try:
    metrics(RequestFactory().get("/metrics"))
except PrometheusClientMissing as exc:
    print("view:", exc)
print("prometheus_client imported:", "prometheus_client" in sys.modules)
"""


def test_without_prometheus_client_the_rest_works_and_metrics_name_the_extra(tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    done = subprocess.run([sys.executable, "-c", WITHOUT_PROMETHEUS_CLIENT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "runworker --burst exited with 0" in done.stdout, output
    assert "succeeded: 20" in done.stdout, output
    extra = "needs prometheus_client: pip install 'django-sqlqueue[prometheus]'"
    assert f"runworker: --metrics-port {extra}." in done.stdout, output
    assert f"view: the django_sqlqueue metrics view {extra}" in done.stdout, output
    assert "prometheus_client imported: False" in done.stdout, output
