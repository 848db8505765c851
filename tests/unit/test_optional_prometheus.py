"""Without prometheus_client (no ``[prometheus]`` extra) everything but metrics works: every
module imports, jobs are enqueued and run by ``runworker``, and asking for metrics fails with an
error that names the extra to install."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hidden_package import without

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    os.environ.get("SQLQUEUE_TEST_DATABASE", "postgresql") != "sqlite",
    reason="one run is enough: the database plays no part; runs in the sqlite pass",
)

WITHOUT_PROMETHEUS_CLIENT = without("prometheus_client") + """
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
