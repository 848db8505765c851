"""What an operator looks at first, in a real browser at 1366 x 768 with the admin's sidebar open
(issue 42): a failed job's page shows its error above the fold, not "Progress: None", a red
"Transactional" cross and empty unique fields; the dashboard's queue table and the schedules'
list keep their last columns (WAITING ON, LAST RUN) in sight. Chromium as in
tests/admin/test_browser.py (same fixture); it runs on every database. The screenshots are
left in the test's temporary directory."""

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.models import Job, Schedule
from tests.admin.demo_data import seed, seed_schedules
from tests.admin.test_browser import browser  # noqa: F401 - the fixture
from tests.admin.test_browser_dashboard import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

#: The fold of a 1366 x 768 laptop screen, less the browser's own bars.
FOLD = 700

#: The labels of a job page's rows, as shown.
ROW_LABELS = """
return [...document.querySelectorAll('#content-main .form-row')]
  .filter(row => row.offsetParent !== null)
  .map(row => (row.querySelector('label') || {}).textContent || '')
  .map(text => text.replace(/:$/, '').trim().toLowerCase());
"""

#: [the columns' headings whose right edge is past their box's, the box's scroll and width].
CUT_COLUMNS = """
const table = document.querySelector(arguments[0]);
const box = table.closest(arguments[1]);
const right = box.getBoundingClientRect().right;
const cut = [...table.querySelectorAll('thead th')]
  .filter(th => th.offsetParent !== null && th.getBoundingClientRect().right > right + 1)
  .map(th => th.textContent.trim());
return [cut, box.scrollWidth, box.clientWidth];
"""


@pytest.fixture
def laptop(browser, live_server, django_user_model):  # noqa: F811
    browser.set_window_size(1366, 768)
    log_in(browser, live_server, django_user_model, reverse("admin:index"))

    def open_page(url):
        browser.get(live_server.url + url)
        assert browser.find_element("id", "nav-sidebar").is_displayed()
        return browser

    return open_page


def screenshot(page, path):
    """The whole page, to look at."""
    height = page.execute_script("return document.documentElement.scrollHeight;")
    page.set_window_size(1366, min(max(height, 768), 3000))
    page.save_screenshot(str(path))
    page.set_window_size(1366, 768)


@pytest.mark.parametrize("which", ["failed", "exhausted"])
def test_a_failed_jobs_page_shows_its_error_first(laptop, tmp_path, which):
    notable = seed()
    job = notable[which]
    page = laptop(reverse("admin:django_sqlqueue_job_change", args=[job.pk]))
    screenshot(page, tmp_path / f"job-{which}.png")
    top = page.execute_script(
        "const e = document.getElementById('sq-last-error');"
        "return e && [e.getBoundingClientRect().top, e.innerText];")
    assert top is not None, "no error section on the page"
    assert top[0] < FOLD - 150, f"the error starts at {top[0]}px"
    last = job.errors[-1]
    assert last["type"] in top[1] and last["message"] in top[1]
    traceback_top = page.execute_script(
        "return document.querySelector('#sq-last-error .sq-traceback')"
        ".getBoundingClientRect().top;")
    assert traceback_top < FOLD, f"the traceback starts at {traceback_top}px"
    labels = page.execute_script(ROW_LABELS)
    # Empty or beside the point for this job: no row at all.
    for label in ("progress", "transactional", "unique slot", "cancelled", "workflow"):
        assert label not in labels, f"{label!r} is shown: {labels}"
    assert ("unique key" in labels) == bool(job.unique_key)  # the exhausted one has one
    assert "status" in labels and "task name" in labels


def long_named_schedule():
    """A schedule as projects name them: a long name with underscores, a long task name, a
    cron in a time zone with a long name, run a minute ago."""
    now = timezone.now()
    job = Job.objects.create(task_name=TASK, status="succeeded", attempts=1,
                             payload={"args": [], "kwargs": {}}, finished_at=now)
    Schedule.objects.create(
        name="warehouse_stock_reconciliation_nightly", task_name=TASK, cron="15 4 * * 1-5",
        timezone="America/Argentina/Buenos_Aires", payload={"args": [], "kwargs": {}},
        job_options={"queue": "default"}, next_run_at=now + dt.timedelta(hours=3),
        last_run_at=now - dt.timedelta(minutes=1), last_job_id=job.pk, runs=212,
        created_at=now - dt.timedelta(days=30), synced_at=now - dt.timedelta(days=1))


TASK = "shop.inventory.tasks.reconcile_warehouse_stock_levels"


def test_the_dashboard_and_the_schedules_keep_their_last_columns(laptop, tmp_path):
    seed()
    seed_schedules()
    long_named_schedule()
    page = laptop(reverse("admin:django_sqlqueue_job_dashboard"))
    screenshot(page, tmp_path / "dashboard.png")
    cut, scroll, width = page.execute_script(CUT_COLUMNS, "#sq-queues", ".sq-table-box")
    assert not cut and scroll <= width, f"queue table {scroll}px in {width}px, cut: {cut}"
    page = laptop(reverse("admin:django_sqlqueue_schedule_changelist"))
    screenshot(page, tmp_path / "schedules.png")
    cut, scroll, width = page.execute_script(CUT_COLUMNS, "#result_list", ".results")
    assert not cut and scroll <= width, f"schedule list {scroll}px in {width}px, cut: {cut}"
    headings = page.execute_script(
        "return [...document.querySelectorAll('#result_list thead th')]"
        ".filter(th => th.offsetParent !== null).map(th => th.textContent.trim());")
    assert "LAST RUN" in [heading.upper() for heading in headings], headings
