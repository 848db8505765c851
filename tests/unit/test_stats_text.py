"""The text of ``manage.py stats``: estimated counts and lags are marked, and the notes say so."""

import datetime as dt
from types import SimpleNamespace

from django_sqlqueue.management.stats_text import lines
from django_sqlqueue.observability.snapshot import STATES, QueueSnapshot, Snapshot

NOW = dt.datetime(2030, 1, 1, 3, 0, tzinfo=dt.UTC)
NONE = {"succeeded": 0, "exhausted": 0, "cancelled": 0, "expired": 0}


def snap(estimated=()):
    queue = QueueSnapshot("default", counts={**dict.fromkeys(STATES, 0), "queued": 900_000,
                                             "exhausted": 40},
                          lag_seconds=7200, live_workers=1,
                          throughput={"1h": NONE, "24h": NONE, "7d": NONE},
                          per_minute=[[2, 0]] * 60)
    worker = SimpleNamespace(state="alive", concurrency=8)
    return Snapshot(NOW, [queue], [worker], estimated=estimated)


def test_exact_counts_are_plain():
    head, _, row = lines(snap())
    assert head == "2030-01-01 03:00:00 UTC  1 live worker, 8 slots"
    assert row.split()[:8] == ["default", "900000", "0", "0", "0", "0", "40", "2"]


def test_estimates_are_marked():
    *_, row, note = lines(snap(estimated=("queued", "scheduled", "failed", "exhausted")))
    assert row.split()[:9] == ["default", "~900000", "~0", "0", "0", "~0", "~40", ">2", "h"]
    assert note == ("~ estimated from a sample of the table (counted exactly up to 200,000 "
                    "jobs); > the lag is at least this")
