"""Where workers LISTEN: the jobs database, SQLQUEUE["LISTEN_DATABASE"] around a pooler, or
nowhere (polling, said by the banner and a system check)."""

import pytest
from django.core import checks
from django.db import connections

from django_sqlqueue.worker.wakeup import Wakeup

pytestmark = pytest.mark.postgresql


@pytest.fixture(autouse=True)
def direct(monkeypatch, settings):
    """Defaults first (in the pgbouncer pass the suite is behind a pooler, with LISTEN_DATABASE)."""
    monkeypatch.setitem(connections["default"].settings_dict, "DISABLE_SERVER_SIDE_CURSORS", False)
    settings.SQLQUEUE = {}


@pytest.fixture
def behind_pooler(monkeypatch):
    """The jobs database marked as reached through a transaction pooler, as Django's docs say."""
    monkeypatch.setitem(connections["default"].settings_dict, "DISABLE_SERVER_SIDE_CURSORS", True)


def sqlqueue_checks():
    return [m for m in checks.run_checks() if m.id.startswith("sqlqueue")]


def test_a_direct_database_is_listened_on_itself():
    wakeup = Wakeup(alias="default", queues=None, poll_interval=1, use_notify=True)
    assert wakeup.use_notify and wakeup.mode.startswith("LISTEN/NOTIFY")
    assert wakeup.listen_params["port"] == connections["default"].settings_dict["PORT"]
    assert sqlqueue_checks() == []


def test_behind_a_pooler_without_a_listen_database_workers_poll_and_say_why(behind_pooler):
    wakeup = Wakeup(alias="default", queues=None, poll_interval=1, use_notify=True)
    assert not wakeup.use_notify
    assert "no LISTEN: the database 'default' has DISABLE_SERVER_SIDE_CURSORS" in wakeup.mode
    (warning,) = sqlqueue_checks()
    assert warning.id == "sqlqueue.W001" and "LISTEN_DATABASE" in warning.hint


def test_behind_a_pooler_with_notify_off_nothing_is_said(behind_pooler, settings):
    settings.SQLQUEUE = {"NOTIFY": False}
    assert sqlqueue_checks() == []


def test_listen_database_names_an_alias_or_a_connection_string(behind_pooler, settings):
    settings.SQLQUEUE = {"LISTEN_DATABASE": "other"}
    wakeup = Wakeup(alias="default", queues=None, poll_interval=1, use_notify=True)
    assert wakeup.use_notify
    assert wakeup.listen_params["dbname"] == connections["other"].settings_dict["NAME"]
    assert sqlqueue_checks() == []
    dsn = "postgresql://postgres@127.0.0.1:5432/jobs"
    settings.SQLQUEUE = {"LISTEN_DATABASE": dsn}
    assert Wakeup(alias="default", queues=None, poll_interval=1,
                  use_notify=True).listen_params == {"conninfo": dsn}


def test_an_unknown_listen_alias_is_an_error_naming_the_fix(settings):
    settings.SQLQUEUE = {"LISTEN_DATABASE": "direkt"}
    (error,) = sqlqueue_checks()
    assert error.id == "sqlqueue.E003"
    assert "'direkt' is not in settings.DATABASES" in error.msg
