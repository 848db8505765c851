import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections

from tests.mariadb_server import MariaDBServer
from tests.postgres_cluster import Cluster
from tests.support.plans import analyzed  # noqa: F401 - a fixture of the plan tests

VENDOR = os.environ.get("SQLQUEUE_TEST_DATABASE", "postgresql")
# The pgbouncer pass is PostgreSQL through a transaction-pooling PgBouncer (tests/pgbouncer.py).
POSTGRESQL = VENDOR in ("postgresql", "pgbouncer")
MARIADB = VENDOR == "mariadb"
ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    # A shell without job control starts its background commands (`pytest ... &`, a CI step run
    # in the background) with SIGINT ignored, and every process started from them inherits that:
    # the tests that press Ctrl-C on a worker or on `stats --watch` would then wait a minute and
    # fail. A handler (unlike "ignored") is not inherited across exec: the subprocesses get the
    # default again, as from a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _cpu_seconds() -> float:
    """CPU time of this process and of its children that ended (a test's workers are waited
    for when they stop or are killed)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    item.cpu_started = _cpu_seconds(), time.monotonic()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    # Each test's CPU seconds (its workers' included) beside its seconds in the JUnit XML
    # (scripts/test.sh writes one per pass): CI runs on two cores, so its time is CPU, not waits.
    if call.when == "teardown" and hasattr(item, "cpu_started"):
        cpu, wall = item.cpu_started
        item.user_properties.append(("cpu_seconds", f"{_cpu_seconds() - cpu:.2f}"))
        item.user_properties.append(("wall_seconds", f"{time.monotonic() - wall:.2f}"))
    return (yield)


def pytest_report_header(config):
    return f"django-sqlqueue tests on {VENDOR}"


def pytest_collection_modifyitems(config, items):
    # Tests marked postgresql run in the PostgreSQL pass of the test command (never skipped
    # there: a missing server fails that pass).
    if not POSTGRESQL:
        skip = pytest.mark.skip(reason="PostgreSQL-only; runs in the postgresql pass")
        for item in items:
            if "postgresql" in item.keywords:
                item.add_marker(skip)
    if not POSTGRESQL and not MARIADB:
        skip = pytest.mark.skip(reason="needs a database server; runs in the postgresql and "
                                       "mariadb passes")
        for item in items:
            if "server_database" in item.keywords:
                item.add_marker(skip)
    if MARIADB:
        skip = pytest.mark.skip(reason="not on MariaDB (the test says why)")
        for item in items:
            if "not_mariadb" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def pg_cluster():
    """The throwaway PostgreSQL cluster, or None when DATABASE_URL names a server."""
    if not POSTGRESQL or "DATABASE_URL" in os.environ:
        yield None
        return
    cluster = Cluster().start()
    cluster.pgbouncer = None
    port = cluster.port
    if VENDOR == "pgbouncer":
        from tests.pgbouncer import PgBouncer

        bouncer = cluster.pgbouncer = PgBouncer(cluster).start()
        port = bouncer.port
        restart_server = cluster.restart

        def restart(mode="fast"):  # and wait until PgBouncer serves again, as its users would
            restart_server(mode)
            bouncer.wait_serving(connections["default"].settings_dict["NAME"])

        cluster.restart = restart
        # Workers LISTEN around the pooler, on the test database itself (its name is fixed).
        name = settings.DATABASES["default"]["NAME"]
        listen_url = f"postgresql://postgres@127.0.0.1:{cluster.port}/test_{name}"
        os.environ["SQLQUEUE_TEST_LISTEN_URL"] = listen_url  # for worker subprocesses
        settings.SQLQUEUE = {**settings.SQLQUEUE, "LISTEN_DATABASE": listen_url}
    for alias in settings.DATABASES:
        settings.DATABASES[alias]["PORT"] = str(port)
    yield cluster
    connections.close_all()
    if cluster.pgbouncer is not None:
        cluster.pgbouncer.stop()
    cluster.destroy()


@pytest.fixture(scope="session")
def mariadb_server():
    """The throwaway MariaDB server (tests/mariadb_server.py), or None when the pass is not on
    MariaDB or DATABASE_URL names a server."""
    if not MARIADB or "DATABASE_URL" in os.environ:
        yield None
        return
    server = MariaDBServer().start()
    for alias in settings.DATABASES:
        settings.DATABASES[alias]["PORT"] = str(server.port)
    # Worker subprocesses run Django's checks, whose MySQL field check connects to every
    # database: to the test databases of "other" and "jobs" too, which pytest-django creates
    # only for a run with tests that use them. Empty ones do (it re-creates them if needed).
    server.create_databases(*(f"test_{settings.DATABASES[alias]['NAME']}"
                              for alias in settings.DATABASES if alias != "default"))
    yield server
    connections.close_all()
    server.destroy()


@pytest.fixture(scope="session")
def database_server(pg_cluster, mariadb_server):
    """The throwaway server of this pass, PostgreSQL or MariaDB, whichever runs (both have
    ``restart(mode)``); None on SQLite or when DATABASE_URL names a server."""
    return pg_cluster or mariadb_server


@pytest.fixture(scope="session", autouse=VENDOR == "pgbouncer")
def _drop_test_databases_around_pgbouncer(request, pg_cluster):
    """Set up after the test databases, so torn down before they are dropped: PgBouncer keeps
    server connections to them open, which DROP DATABASE refuses; drop them directly."""
    if pg_cluster is None or pg_cluster.pgbouncer is None:
        yield
        return
    request.getfixturevalue("django_db_setup")
    yield
    connections.close_all()
    for alias in connections:
        connections[alias].settings_dict["PORT"] = str(pg_cluster.port)
    pg_cluster.pgbouncer.stop()


@pytest.fixture(autouse=True)
def _no_broken_connection_outlives_a_test():
    """Each test ends by closing the connections a chaos test broke (a restart, a terminated
    connection), before they are used to tear it down or by the next test: Django learns that a
    connection is gone only when it next talks on it. Through PgBouncer every connection is
    dropped (the client side cannot tell a broken server connection behind the pooler); on a
    direct connection, the ones that do not answer. One in a transaction is the test case's, which
    its teardown rolls back."""
    yield
    if VENDOR == "pgbouncer":
        connections.close_all()
        return
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.in_atomic_block:
            if not connection.is_usable():
                connection.close()


JOBS_DATABASE_ROUTERS = [
    "tests.testapp.routers.JobsDatabaseRouter", "tests.testapp.routers.OrdersOnOther",
]


@pytest.fixture
def jobs_database():
    """The queue's tables in the "jobs" database, as docs/scaling.md sets it up: the router for
    this test, and ``migrate --database jobs``. (Not for every test: with the queue migratable
    on "jobs", Django's model checks would query it from tests that do not use it.)"""
    from django.core.management import call_command
    from django.test import override_settings

    with override_settings(DATABASE_ROUTERS=JOBS_DATABASE_ROUTERS):
        if "django_sqlqueue_job" not in connections["jobs"].introspection.table_names():
            # The test database was migrated without the queue's tables (the suite's router
            # keeps "jobs" empty), but its migrations are recorded as applied: forget them.
            call_command("migrate", "django_sqlqueue", "zero", fake=True, database="jobs",
                         verbosity=0)
            call_command("migrate", "django_sqlqueue", database="jobs", verbosity=0)
        yield
        # Emptied here, while the router sends the queue there: the test case's own flush, after
        # this fixture, sees the suite's router, which keeps the queue out of "jobs".
        call_command("flush", database="jobs", interactive=False, inhibit_post_migrate=True,
                     verbosity=0)


def direct_connect_kwargs(alias="default") -> dict:
    """``psycopg.connect()`` arguments reaching the test database directly, around PgBouncer
    in the pgbouncer pass: where a test LISTENs itself."""
    if os.environ.get("SQLQUEUE_TEST_LISTEN_URL"):
        return {"conninfo": os.environ["SQLQUEUE_TEST_LISTEN_URL"]}
    params = connections[alias].settings_dict
    return {"dbname": params["NAME"], "user": params["USER"], "host": params["HOST"],
            "port": params["PORT"]}


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, pg_cluster,
                                 mariadb_server):
    """Start the server before pytest-django creates the test databases on it."""


@pytest.fixture
def db_url():
    """Builds a DATABASE_URL for a subprocess, pointing at this run's test database."""

    def build(alias="default"):
        conn = settings.DATABASES[alias]
        if conn["ENGINE"].endswith("sqlite3"):
            return f"sqlite:///{conn['NAME']}"
        password = f":{conn['PASSWORD']}" if conn.get("PASSWORD") else ""
        scheme = "mysql" if conn["ENGINE"].endswith("mysql") else "postgres"
        return (
            f"{scheme}://{conn['USER']}{password}@{conn['HOST']}:{conn['PORT']}/{conn['NAME']}"
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
    from django_sqlqueue.schedules import declare

    saved = dict(declare._declared)
    declare._declared.clear()
    yield declare._declared
    declare._declared.clear()
    declare._declared.update(saved)
