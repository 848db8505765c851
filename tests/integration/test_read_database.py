"""SQLQUEUE["READ_DATABASE"]: where the dashboard, stats and the metrics view read, checked at
``manage.py check``; a snapshot says which database it read and, on a standby, how current that
is (tests/admin/test_replica_reads.py reads from a real one)."""

import datetime as dt

import pytest

from django_sqlqueue.checks import check_read_database
from django_sqlqueue.observability import replica, snapshot

pytestmark = pytest.mark.django_db


def _read_database_errors():
    # This check alone: the pgbouncer pass adds its warning sqlqueue.W001 to every run of the
    # checks, and on MariaDB Django's own checks connect to every database.
    return check_read_database()


def test_an_unknown_read_alias_is_an_error_naming_it(settings):
    settings.SQLQUEUE = {"READ_DATABASE": "replika"}
    (error,) = _read_database_errors()
    assert error.id == "sqlqueue.E004"
    assert "'replika' is not in settings.DATABASES" in error.msg


def test_read_alias_is_the_setting_else_the_fallback(settings):
    assert replica.read_alias("default") == "default"
    settings.SQLQUEUE = {"READ_DATABASE": "other"}
    assert replica.read_alias("default") == "other"
    assert _read_database_errors() == []


def test_a_snapshot_of_a_primary_names_it_and_no_replica():
    snap = snapshot.take()
    assert snap.database == "default" and snap.replica is None
    document = snap.as_json()
    assert document["database"] == "default" and document["replica"] is None


def test_a_replica_state_in_words():
    state = replica.ReplicaState(replayed_at=None, age_seconds=None, replay_lag_seconds=0.0)
    assert state.text() == "a replica that has replayed no transaction yet"
    state = replica.ReplicaState(replayed_at=object(), age_seconds=2.5, replay_lag_seconds=0.0)
    assert state.text() == ("a replica: its last change replayed was committed 2.5 s ago on "
                            "the primary (replay 0 ms behind)")


def test_a_standby_that_keeps_up_is_never_younger_than_zero():
    # Its replayed commit was stamped by the primary's clock a little after the standby's now():
    # the row says -4 ms; stats --json and the gauge say 0.
    state = replica.from_row((dt.datetime.now(dt.UTC), -0.004, -0.001))
    assert state.age_seconds == 0.0 and state.replay_lag_seconds == 0.0
    assert state.as_json()["age_seconds"] == 0.0
    assert replica.from_row((None, None, None)).age_seconds is None
