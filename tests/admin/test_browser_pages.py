"""Every admin page of the app, in a real browser at 1366 x 768 with the admin's navigation
sidebar open (as a first visit shows it): nothing scrolls sideways (no page, no list in its
box), the breadcrumbs look like Django's, and no link is drawn
narrower than its words (the app page's "Monitor and fix" links once came one letter per line).
Chromium as in tests/admin/test_browser.py (same markers, same fixture); each page's screenshot
is left in the test's temporary directory."""

import pytest
from django.urls import reverse

from django_sqlqueue.models import Job, Schedule, Worker
from django_sqlqueue.queues.control import pause
from tests.admin.demo_data import seed, seed_schedules, seed_workflow
from tests.admin.test_browser import browser  # noqa: F401 - the fixture
from tests.admin.test_browser_dashboard import log_in

pytestmark = [pytest.mark.browser, pytest.mark.postgresql]

#: The links drawn on more lines than they have pieces to break at (words, and the dots and
#: underscores of a task's name): a link wrapped inside a word, as in a box too narrow for it.
BROKEN_LINKS = """
const lines = a => {
  const tops = new Set();
  const walker = document.createTreeWalker(a, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const rect of range.getClientRects()) {
      if (rect.width > 0) tops.add(Math.round(rect.top));
    }
  }
  return tops.size;
};
return [...document.querySelectorAll('#content a')]
  .filter(a => a.offsetParent !== null && a.textContent.trim())
  .filter(a => lines(a) > a.innerText.trim().split(/[\\s._\\/-]+/).length)
  .map(a => JSON.stringify(a.innerText.trim()) + ' on ' + lines(a) + ' lines');
"""


def pages(notable) -> dict:
    job = notable["failed"]
    return {
        "app": reverse("admin:app_list", args=["django_sqlqueue"]),
        "dashboard": reverse("admin:django_sqlqueue_job_dashboard"),
        "jobs": reverse("admin:django_sqlqueue_job_changelist"),
        "job": reverse("admin:django_sqlqueue_job_change", args=[job.pk]),
        "workers": reverse("admin:django_sqlqueue_worker_changelist"),
        "worker": reverse("admin:django_sqlqueue_worker_change",
                          args=[Worker.objects.order_by("pk").first().pk]),
        "schedules": reverse("admin:django_sqlqueue_schedule_changelist"),
        "schedule": reverse("admin:django_sqlqueue_schedule_change",
                            args=[Schedule.objects.order_by("pk").first().pk]),
        "queues": reverse("admin:django_sqlqueue_queue_changelist"),
        "workflow": reverse("admin:django_sqlqueue_job_workflow", args=[seed_workflow()]),
    }


def test_every_page_of_the_app_fits_1366_pixels_with_the_sidebar_open(
    browser, live_server, django_user_model, tmp_path  # noqa: F811
):
    notable = seed()
    seed_schedules()
    pause("reports", by="ops")
    assert Job.objects.exists()
    urls = pages(notable)
    browser.set_window_size(1366, 768)
    log_in(browser, live_server, django_user_model, urls["app"])
    problems = []
    for name, url in urls.items():
        browser.get(live_server.url + url)
        sidebar = browser.execute_script(
            "const bar = document.getElementById('nav-sidebar');"
            "return !!bar && getComputedStyle(bar).display !== 'none';")
        assert sidebar == (name != "app"), name  # Django's index pages have none
        width = browser.execute_script("return document.documentElement.clientWidth;")
        scroll = browser.execute_script("return document.documentElement.scrollWidth;")
        if scroll > width:
            problems.append(f"{name} ({url}) is {scroll}px wide in a {width}px window")
        problems += [f"{name}: the link {link}" for link in browser.execute_script(BROKEN_LINKS)]
        # Breadcrumbs in the markup this Django styles (an <ol> from 6.1, a <div> before).
        if browser.execute_script(
                "return getComputedStyle(document.querySelector('.breadcrumbs'))"
                ".backgroundColor;") in ("rgba(0, 0, 0, 0)", "transparent"):
            problems.append(f"{name}: its breadcrumbs are not styled")
        # A list too wide for its box scrolls inside it (Django's .results), its last columns
        # out of sight.
        box = browser.execute_script(
            "const box = document.querySelector('#changelist .results');"
            "return box && [box.scrollWidth, box.clientWidth];")
        if box and box[0] > box[1]:
            widths = browser.execute_script(
                "return [...document.querySelectorAll('#result_list thead th')]"
                ".map(th => th.className + '=' + Math.round(th.getBoundingClientRect().width));")
            problems.append(f"{name}: the list is {box[0]}px wide in its {box[1]}px box "
                            f"({', '.join(widths)})")
        # The whole page, to look at when it fails.
        height = browser.execute_script("return document.documentElement.scrollHeight;")
        browser.set_window_size(1366, min(max(height, 768), 3000))
        browser.save_screenshot(str(tmp_path / f"{name}.png"))
        browser.set_window_size(1366, 768)
    assert not problems, "\n".join(problems)
