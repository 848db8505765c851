"""The admin in a real browser: log in, filter the failed jobs, retry one, see it queued, and
take the screenshots that docs/admin.md and the README show (the data: tests/admin/demo_data.py).

Runs in the PostgreSQL pass (of the Django 6 run of scripts/test.sh: it is marked ``browser``),
with Debian's chromium and chromium-driver (``apt-get install -y chromium chromium-driver``;
scripts/test.sh installs them when run as root). A missing browser fails the test; set
``SQLQUEUE_SKIP_BROWSER=1`` to skip it instead. The screenshots go to a
temporary directory, or to ``SQLQUEUE_SCREENSHOTS_DIR``; to refresh the ones in the docs:

    SQLQUEUE_SCREENSHOTS_DIR=docs/images SQLQUEUE_TEST_DATABASE=postgresql \\
        .venv/bin/pytest tests/admin/test_browser.py
"""

import os
import shutil
from pathlib import Path

import pytest
from django.urls import reverse

from django_sqlqueue.models import Job
from tests.admin.demo_data import seed, seed_schedules, seed_workflow

CHROMIUM = os.environ.get("SQLQUEUE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("SQLQUEUE_CHROMEDRIVER", "/usr/bin/chromedriver")
CHROME_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run", "--window-size=1400,900", "--force-device-scale-factor=1",
    "--hide-scrollbars", "--lang=en-US",
]
INSTALL_HINT = (
    "Install Chromium and its driver (Debian/Ubuntu: apt-get install -y chromium "
    "chromium-driver), point SQLQUEUE_CHROMIUM / SQLQUEUE_CHROMEDRIVER at them, or set "
    "SQLQUEUE_SKIP_BROWSER=1 to skip this test."
)


@pytest.fixture
def browser():
    if os.environ.get("SQLQUEUE_SKIP_BROWSER") == "1":
        pytest.skip("SQLQUEUE_SKIP_BROWSER=1: the browser test is skipped")
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found. {INSTALL_HINT}", pytrace=False)
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing: pip install -e '.[test]'", pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


@pytest.fixture
def screenshots(tmp_path):
    target = Path(os.environ.get("SQLQUEUE_SCREENSHOTS_DIR") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)

    def save(driver, name, *, max_height=900):
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1400, min(max(height, 600), max_height))
        path = target / f"{name}.png"
        assert driver.save_screenshot(str(path)), f"could not save {path}"
        driver.set_window_size(1400, 900)
        return path

    return save


@pytest.mark.browser
@pytest.mark.postgresql
def test_find_a_failed_job_retry_it_and_see_it_queued(
    browser, live_server, django_user_model, screenshots
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    django_user_model.objects.create_superuser("ops", "ops@example.com", "night-shift")
    notable = seed()

    def url(name, *args):
        return live_server.url + reverse(f"admin:{name}", args=args)

    def text(selector):
        return browser.find_element(By.CSS_SELECTOR, selector).text

    # Log in.
    browser.get(url("django_sqlqueue_job_changelist"))
    browser.find_element(By.NAME, "username").send_keys("ops")
    browser.find_element(By.NAME, "password").send_keys("night-shift")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    assert "Select job to view" in text("#content h1")
    browser.find_element(By.ID, "toggle-nav-sidebar").click()  # more room for the pictures
    pngs = [screenshots(browser, "admin-job-list", max_height=1150)]

    # Filter the failed jobs: two, waiting for their retry.
    browser.find_element(By.LINK_TEXT, "Failed, will retry").click()
    assert "status__exact=failed" in browser.current_url
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(rows) == 2 and all("Failed, will retry" in row.text for row in rows)

    # Retry one of them now.
    failed = notable["failed"]
    browser.find_element(By.CSS_SELECTOR, f"input[name=_selected_action][value='{failed.pk}']") \
        .click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("retry_now")
    browser.find_element(By.CSS_SELECTOR, "button[name=index]").click()
    assert "1 job queued again, due now." in text("ul.messagelist")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")) == 1

    # See it queued, on its page and in the database.
    browser.get(url("django_sqlqueue_job_change", failed.pk))
    assert text(".field-status_badge .sq-badge") == "Queued"
    assert Job.objects.get(pk=failed.pk).status == "queued"

    # The job that failed for good, with every attempt's error.
    browser.get(url("django_sqlqueue_job_change", notable["exhausted"].pk))
    assert "GatewayError" in text(".field-errors_list")
    pngs.append(screenshots(browser, "admin-job-detail", max_height=1500))

    # The dashboard.
    browser.get(url("django_sqlqueue_job_dashboard"))
    assert "no live worker takes that queue" in text(".sq-banner")
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.sq-chart")) == 5
    pngs.append(screenshots(browser, "admin-dashboard", max_height=1700))

    # The workers: who is alive, and what each is running.
    browser.get(url("django_sqlqueue_worker_changelist"))
    assert "presumed dead" in text("#result_list")
    pngs.append(screenshots(browser, "admin-workers", max_height=600))

    # The schedules: when each runs next, its last run and how it went.
    seed_schedules()
    browser.get(url("django_sqlqueue_schedule_changelist"))
    listed = text("#result_list")
    assert "At 02:30 every day (30 2 * * *)" in listed and "Every 5 minutes" in listed
    assert "Exhausted" in listed and "paused" in listed and "retired" in listed
    pngs.append(screenshots(browser, "admin-schedules", max_height=1100))

    # A workflow: its layers, the big one summed up, and why the blocked jobs wait.
    browser.get(url("django_sqlqueue_job_workflow", seed_workflow()))
    assert "waiting for 23 of 120 parents" in text("#content-main")
    assert "CANCEL WORKFLOW" in text(".object-tools").upper()
    pngs.append(screenshots(browser, "admin-workflow", max_height=1500))

    for png in pngs:
        assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 10_000
