"""The example project's export page in a real browser: a click starts a job that reports its
progress, and the page's bar follows it through server-sent events to its end.

Everything is real: the example project's ``runserver`` and ``runworker`` as subprocesses, on a
new SQLite file (as test_demo.py runs the demo; so it runs once, in the SQLite pass), and
Chromium (tests/admin/test_browser.py says how to install it or skip it). The job exports 40
items, each after a sleep, so it runs for two seconds at least; what is asserted is where the
page ends and that its bar never went back, not how many steps a machine's speed let it show."""

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.admin.test_browser import browser  # noqa: F401 - the fixture
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_PROJECT = ROOT / "example_project"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(os.environ.get("SQLQUEUE_TEST_DATABASE", "postgresql") != "sqlite",
                       reason="the example project runs on its own SQLite file, in the sqlite "
                              "pass"),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def example_project(tmp_path):
    """The example project served on a free port, with one worker; yields its base URL."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'shop.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"],
                             cwd=EXAMPLE_PROJECT, env=env, capture_output=True, text=True,
                             timeout=120)
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    port = free_port()
    started = []
    for name, args in (("server", ["runserver", f"127.0.0.1:{port}", "--noreload"]),
                       ("worker", ["runworker", "--concurrency", "2"])):
        log = open(tmp_path / f"{name}.log", "w")  # a file: a full pipe would block it
        started.append((subprocess.Popen(
            [sys.executable, "manage.py", *args], cwd=EXAMPLE_PROJECT, env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True), log))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: urllib.request.urlopen(f"{base}/exports/", timeout=5).status == 200,
                   timeout=60, what="the example project's server to answer",
                   context=lambda: (tmp_path / "server.log").read_text())
        yield base, tmp_path
    finally:
        for process, log in started:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()


def test_the_export_page_follows_a_job_to_its_end(browser, example_project):  # noqa: F811
    from selenium.webdriver.common.by import By

    base, logs = example_project
    browser.get(f"{base}/exports/")
    browser.find_element(By.ID, "start").click()

    def text(element_id):
        return browser.find_element(By.ID, element_id).text

    def logs_text():
        return "\n".join(f"--- {name}.log\n{(logs / f'{name}.log').read_text()}"
                         for name in ("server", "worker"))

    wait_until(lambda: text("status") == "succeeded", timeout=120, interval=0.2,
               what="the page to show the job succeeded",
               context=lambda: f"status {text('status')!r}\n{logs_text()}")
    assert browser.find_element(By.ID, "bar").get_property("value") == 100
    assert text("percent") == "100%"
    assert text("message") == "Done: 40 items in catalogue.csv"
    assert browser.find_element(By.ID, "start").is_enabled()  # ready for another export
    shown = browser.execute_script("return window.percentsShown")
    assert shown and shown[-1] == 100 and shown == sorted(shown), shown
