"""Reading from a replica (``SQLQUEUE["READ_DATABASE"]``): where the dashboard, ``manage.py stats``
and the metrics view read, and how current that database is when it is a standby. Writes and the
claim never go there (docs/topology.md)."""

import datetime as dt
from dataclasses import dataclass

from django.db import connections

from ..conf import get_settings
from ..db import ops
from .durations import seconds_text


@dataclass
class ReplicaState:
    """How current the data of a standby is."""

    replayed_at: dt.datetime | None  # primary's commit time of the last transaction replayed
    age_seconds: float | None  # how long ago that was, by the standby's clock
    replay_lag_seconds: float  # replay behind what it received (0: replayed all it has)

    def as_json(self) -> dict:
        return {"replayed_at": None if self.replayed_at is None else self.replayed_at.isoformat(),
                "age_seconds": _rounded(self.age_seconds),
                "replay_lag_seconds": _rounded(self.replay_lag_seconds)}

    def text(self) -> str:
        if self.replayed_at is None:
            return "a replica that has replayed no transaction yet"
        return (f"a replica: its last change replayed was committed "
                f"{seconds_text(self.age_seconds)} ago on the primary "
                f"(replay {seconds_text(self.replay_lag_seconds)} behind)")


def read_alias(fallback: str) -> str:
    """Where the dashboard, stats and the metrics view read: ``SQLQUEUE["READ_DATABASE"]`` (a
    replica), else ``fallback``, what they read without it."""
    return get_settings().READ_DATABASE or fallback


def replica_state(alias: str) -> ReplicaState | None:
    """How current ``alias`` is if it is a standby; None for a primary, and on databases whose
    driver does not report it (SQLite, MariaDB: not measured). Only the database named by
    ``READ_DATABASE`` is asked: any other is where the jobs are written, a primary, and the
    question would cost every dashboard refresh a query for nothing."""
    if alias != get_settings().READ_DATABASE:
        return None
    driver = ops(connections[alias])
    row = driver.replica_state() if driver.reports_replica_state else None
    if row is None:
        return None
    return from_row(row)


def from_row(row) -> ReplicaState:
    """The state of a standby's row ``(replayed_at, age, lag)``. Ages are clamped at 0: a
    standby that keeps up replays a commit stamped by the primary's clock a little after its
    own ``now()`` (the start of the reading transaction, or a clock a few ms behind), which
    would read as a negative age."""
    replayed_at, age, lag = row
    return ReplicaState(replayed_at, None if age is None else max(0.0, float(age)),
                        max(0.0, float(lag or 0)))


def _rounded(seconds) -> float | None:
    return None if seconds is None else round(seconds, 3)
