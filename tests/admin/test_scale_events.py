"""The dashboard's autoscaling table: each ``runworker --autoscale`` supervisor's last changes
(models.ScaleEvent, written by the supervisor through ``ScaleEvent.objects.record``), and how
many of them the table keeps."""

import datetime as dt
import re
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.models import ScaleEvent
from django_sqlqueue.models.scale_event import KEEP_PER_SUPERVISOR

pytestmark = pytest.mark.django_db
DASHBOARD = reverse("admin:django_sqlqueue_job_dashboard")
DASHBOARD_DATA = reverse("admin:django_sqlqueue_job_dashboard_data")


def change(host, pid, before, after, reason="why"):
    return ScaleEvent.objects.record(host=host, pid=pid, processes_before=before,
                                     processes=after, action="grow" if after > before
                                     else "shrink", reason=reason)


def rows(html) -> list:
    """(supervisor, from-to) of the table's rows, in order."""
    table = re.search(r'<table class="sq-table" id="sq-scale-events">.*?</table>', html, re.S)
    assert table, "no autoscaling table"
    return re.findall(r'data-supervisor="([^"]+)" data-change="([^"]+)"', table.group(0))


def test_the_dashboard_shows_each_supervisors_last_changes_newest_first(admin_client):
    change("web-1", 41, 1, 4, "oldest due job waited 6.1s (target 5s); 230 due, 8 running")
    change("web-2", 77, 1, 2, "7.0 jobs/s arrive, 2.0/s complete")
    change("web-1", 41, 4, 3, "slots idle for 60s (cool-down 60s): 0% busy, 0 due, 0 running")
    html = unescape(admin_client.get(DASHBOARD).content.decode())
    # The supervisor that changed last first, each one's changes newest first.
    assert rows(html) == [("web-1:41", "4-3"), ("web-1:41", "1-4"), ("web-2:77", "1-2")]
    assert "web-1, pid 41" in html and "web-2, pid 77" in html
    assert "4 → 3" in html and "oldest due job waited 6.1s (target 5s); 230 due" in html
    assert "slots idle for 60s" in html
    # The page's refresh carries it too.
    refreshed = unescape(admin_client.get(DASHBOARD_DATA).json()["html"])
    assert rows(refreshed) == rows(html)


def test_no_autoscaling_table_without_autoscaling(admin_client):
    html = admin_client.get(DASHBOARD).content.decode()
    assert "sq-scale-events" not in html


def test_a_supervisor_keeps_its_last_changes_and_a_day_of_anyone_elses():
    for n in range(KEEP_PER_SUPERVISOR + 3):
        change("web-1", 41, n + 1, n + 2, reason=f"change {n}")
    change("web-2", 77, 1, 2)
    gone = change("web-3", 12, 1, 3)  # a supervisor stopped a day ago
    ScaleEvent.objects.filter(pk=gone.pk).update(at=timezone.now() - dt.timedelta(hours=25))
    assert ScaleEvent.objects.filter(host="web-3").exists()  # until the next change anywhere

    change("web-1", 41, 9, 10, reason="the latest")
    kept = list(ScaleEvent.objects.filter(host="web-1").values_list("reason", flat=True))
    assert kept == ["the latest"] + [f"change {n}" for n in (7, 6, 5, 4)]
    assert ScaleEvent.objects.filter(host="web-2").count() == 1  # another's: untouched
    assert not ScaleEvent.objects.filter(host="web-3").exists()
    grouped = ScaleEvent.objects.by_supervisor()
    assert [(key, len(events)) for key, events in grouped] == [
        (("web-1", 41), KEEP_PER_SUPERVISOR), (("web-2", 77), 1)]


def test_a_long_reason_is_cut_to_the_column():
    event = change("web-1", 41, 1, 4, reason="x" * 900)
    assert len(ScaleEvent.objects.get(pk=event.pk).reason) == 500
