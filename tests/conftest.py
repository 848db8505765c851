import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections

from tests.postgres_cluster import Cluster

VENDOR = os.environ.get("SQLQUEUE_TEST_DATABASE", "postgresql")
ROOT = Path(__file__).resolve().parent.parent


def pytest_report_header(config):
    return f"django-sqlqueue tests on {VENDOR}"


def pytest_collection_modifyitems(config, items):
    # Tests marked postgresql run in the PostgreSQL pass of the test command (never skipped
    # there: a missing server fails that pass).
    if VENDOR != "postgresql":
        skip = pytest.mark.skip(reason="PostgreSQL-only; runs in the postgresql pass")
        for item in items:
            if "postgresql" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def pg_cluster():
    """The throwaway PostgreSQL cluster, or None when DATABASE_URL names a server."""
    if VENDOR != "postgresql" or "DATABASE_URL" in os.environ:
        yield None
        return
    cluster = Cluster().start()
    for alias in settings.DATABASES:
        settings.DATABASES[alias]["PORT"] = str(cluster.port)
    yield cluster
    connections.close_all()
    cluster.destroy()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, pg_cluster):
    """Start the cluster before pytest-django creates the test databases on it."""


@pytest.fixture
def db_url():
    """Builds a DATABASE_URL for a subprocess, pointing at this run's test database."""

    def build(alias="default"):
        conn = settings.DATABASES[alias]
        if conn["ENGINE"].endswith("sqlite3"):
            return f"sqlite:///{conn['NAME']}"
        password = f":{conn['PASSWORD']}" if conn.get("PASSWORD") else ""
        return (
            f"postgres://{conn['USER']}{password}@{conn['HOST']}:{conn['PORT']}/{conn['NAME']}"
        )

    return build


@pytest.fixture
def run_python():
    """Start ``python -m MODULE`` with the test settings; for real worker processes."""

    def start(module, *args, env=None):
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    return start


@pytest.fixture
def declared_schedules():
    """The registry of @schedule declarations, emptied for the test and restored after it:
    a test declares its own schedules without leaking them into others."""
    from django_sqlqueue import schedules

    saved = dict(schedules._declared)
    schedules._declared.clear()
    yield schedules._declared
    schedules._declared.clear()
    schedules._declared.update(saved)
