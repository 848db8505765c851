"""The queue dashboard in a real browser: it updates by itself, without a page reload, when a job
finishes; and the job list's key columns fit a 1366-pixel screen. Chromium as in
tests/admin/test_browser.py (same markers, same fixture)."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.models import Job
from tests.admin.demo_data import seed
from tests.admin.test_browser import browser  # noqa: F401 - the fixture
from tests.testapp.tasks import add

pytestmark = [pytest.mark.browser, pytest.mark.postgresql]


def log_in(browser, live_server, django_user_model, start):  # noqa: F811
    from selenium.webdriver.common.by import By

    django_user_model.objects.create_superuser("ops", "ops@example.com", "night-shift")
    browser.get(live_server.url + start)
    browser.find_element(By.NAME, "username").send_keys("ops")
    browser.find_element(By.NAME, "password").send_keys("night-shift")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()


def test_the_dashboard_updates_by_itself_when_a_job_finishes(
    browser, live_server, django_user_model  # noqa: F811
):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    job = add.enqueue(2, 3)
    log_in(browser, live_server, django_user_model, reverse("admin:django_sqlqueue_job_dashboard"))

    def tile(name):
        # The refresh replaces the tiles: one found just before it is stale when read, so find
        # it again (a few times at most: a refresh comes every 5 s).
        for _ in range(5):
            try:
                return browser.find_element(By.CSS_SELECTOR, f"[data-sq='{name}']").text
            except StaleElementReferenceException:
                continue
        raise AssertionError(f"the {name!r} tile kept being replaced")

    assert (tile("queued"), tile("running"), tile("done-1h")) == ("1", "0", "0")
    # A page reload would forget this.
    browser.execute_script("window.sqlqueueLoadedOnce = true;")

    [claimed] = Job.objects.claim(["default"], "browser-test", limit=1)
    assert claimed.pk == job.pk
    WebDriverWait(browser, 30, poll_frequency=0.2).until(lambda _: tile("running") == "1")
    claimed.complete(5, now=timezone.now())
    WebDriverWait(browser, 30, poll_frequency=0.2).until(lambda _: tile("done-1h") == "1")

    assert (tile("queued"), tile("running"), tile("done-7d")) == ("0", "0", "1")
    assert browser.execute_script("return window.sqlqueueLoadedOnce === true;")
    # Refreshed, the time is written as the page wrote it (24 hours), not in the browser's
    # en-US "9:42:42 PM".
    assert re.fullmatch(r"Updated \d\d:\d\d:\d\d; refreshes every \d+ s\.",
                        browser.find_element(By.ID, "sq-updated").text)
    assert "sq-stale" not in browser.find_element(By.ID, "sq-updated").get_attribute("class")


def test_the_job_lists_key_columns_fit_a_1366_pixel_screen(
    browser, live_server, django_user_model  # noqa: F811
):
    from selenium.webdriver.common.by import By

    seed()  # long task names and error messages among the newest jobs
    browser.set_window_size(1366, 768)
    log_in(browser, live_server, django_user_model,
           reverse("admin:django_sqlqueue_job_changelist"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(rows) > 20
    # With the admin's navigation sidebar open, as a first visit shows it.
    assert browser.find_element(By.ID, "nav-sidebar").is_displayed()
    width = browser.execute_script("return document.documentElement.clientWidth;")
    assert browser.execute_script(
        "return document.documentElement.scrollWidth;") <= width, "the page scrolls sideways"
    # The table scrolls inside its box (.results) when too wide: a cell must end within the box.
    box = browser.execute_script(
        "return document.querySelector('#changelist .results').getBoundingClientRect().right;")
    limit = min(width, box)
    for column in ("status_badge", "task", "last_error"):
        cells = browser.find_elements(By.CSS_SELECTOR, f"#result_list td.field-{column}, "
                                                       f"#result_list th.field-{column}")
        assert len(cells) == len(rows)
        for cell in cells:
            right = browser.execute_script(
                "return arguments[0].getBoundingClientRect().right;", cell)
            assert right <= limit, f"{column} ends at {right}px, past {limit}px: {cell.text!r}"
    errors = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR,
                                                          "#result_list td.field-last_error")]
    assert any("GatewayError" in text or "ReadTimeout" in text for text in errors)
