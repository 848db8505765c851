"""Fixtures of the chaos suite, and its figures: one line per scenario at the end of the run, and
the same figures as JSON in $SQLQUEUE_RELIABILITY_REPORT (what scripts/reliability.sh renders into
docs/reliability.md).

``SQLQUEUE_SOAK=1`` scales every scenario up (more jobs, more kills and restarts, more examples);
CI runs the small sizes.
"""

import datetime as dt
import json
import os
import platform
import subprocess
import time
from pathlib import Path

import django
import pytest
from django.db import connection

from tests.process.conftest import start_worker  # noqa: F401 - the fixture, used here

SOAK = os.environ.get("SQLQUEUE_SOAK", "") not in ("", "0")
VENDOR = os.environ.get("SQLQUEUE_TEST_DATABASE", "postgresql")
ROOT = Path(__file__).resolve().parents[2]
_FIGURES: list = []
_DATABASE: dict = {}


def sized(ci, soak):
    """The CI size of a scenario, or its soak size with SQLQUEUE_SOAK=1."""
    return soak if SOAK else ci


def pytest_collection_modifyitems(config, items):
    """Soak runs last as long as they take: no per-test timeout for the chaos suite then (each
    scenario's waits still have their deadlines)."""
    if SOAK:
        here = Path(__file__).parent
        for item in items:
            if here in item.path.parents:
                item.add_marker(pytest.mark.timeout(0), append=False)


# ---- worker fleets (the Fleet itself: tests/support/fleet.py) ----------------------------
@pytest.fixture
def db_url(db_url):
    """Workers keep their connections, as docs/operations.md recommends for production
    (CONN_MAX_AGE > 0 with CONN_HEALTH_CHECKS): with Django's default of 0, every job would open
    a new PostgreSQL connection. Health checks replace connections a restart or kill broke."""

    def build(alias="default"):
        url = db_url(alias)
        if url.startswith("postgres"):
            url += "?conn_max_age=600&conn_health_checks=True"
        return url

    return build


# ---- figures ---------------------------------------------------------------------------------
@pytest.fixture(params=[25, 1], ids=["retries", "one-attempt"])
def max_attempts(request):
    """Each scenario twice: with retries, and at the django.tasks backend's defaults (one
    attempt), where the chaos may interrupt runs but never fail a job (docs/reliability.md)."""
    return request.param


def with_attempts(settings: dict, max_attempts: int) -> dict:
    """The settings of a run with ``max_attempts``."""
    return {**settings, "MAX_ATTEMPTS": max_attempts}


@pytest.fixture
def reliability(request):
    """``reliability("kills", jobs=..., lost=...)``: keep and print one scenario's figures."""

    def record(scenario, **figures):
        entry = {"scenario": scenario, "vendor": VENDOR, "soak": SOAK, **figures,
                 "test": request.node.nodeid, "outcome": None}
        _FIGURES.append(entry)
        if not _DATABASE.get("version"):
            _DATABASE["version"] = _database_version()
        print(figure_line(entry))
        return entry

    return record


def figure_line(entry) -> str:
    skip = {"scenario", "vendor", "soak", "test", "outcome", "duplicate_causes"}
    parts = [f"{key}={value}" for key, value in entry.items() if key not in skip]
    causes = entry.get("duplicate_causes")
    if causes:
        parts.append("duplicates_because=" + "; ".join(f"{k}: {v}" for k, v in causes.items()))
    return f"reliability {entry['scenario']} [{entry['vendor']}]: " + " ".join(parts)


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome == "failed":
        for entry in _FIGURES:
            if entry["test"] == report.nodeid and entry["outcome"] != "failed":
                entry["outcome"] = report.outcome


def pytest_terminal_summary(terminalreporter):
    if _FIGURES:
        terminalreporter.section("reliability figures")
        for entry in _FIGURES:
            terminalreporter.write_line(f"{figure_line(entry)} ({entry['outcome']})")


def _database_version() -> str:
    try:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SHOW server_version")
                return "PostgreSQL " + cursor.fetchone()[0].split()[0]
            cursor.execute("SELECT sqlite_version()")
            return "SQLite " + cursor.fetchone()[0]
    except Exception:  # no database access in this test
        return None


def _commit() -> str:
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout
    commit = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    return commit + ("+changes" if git("status", "--porcelain").strip() else "")


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("SQLQUEUE_RELIABILITY_REPORT")
    if not path or not _FIGURES:
        return
    report = {
        "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": os.environ.get("SQLQUEUE_RELIABILITY_COMMAND", "pytest tests/chaos"),
        "passed": exitstatus == 0 and all(e["outcome"] == "passed" for e in _FIGURES),
        "soak": SOAK,
        "vendor": VENDOR,
        "commit": _commit(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "django": django.get_version(),
        "database": _DATABASE.get("version") or VENDOR,
        "scenarios": _FIGURES,
    }
    Path(path).write_text(json.dumps(report, indent=2, default=str) + "\n")


def elapsed(since: float) -> float:
    return round(time.monotonic() - since, 1)
