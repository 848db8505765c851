"""The maintenance steps' configs and settings: defaults from one place, bad values refused at
construction with the field named; and the process-table identity the reaper trusts."""

import os

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_sqlqueue.conf import QueueSettings, get_settings
from django_sqlqueue.worker import identity
from django_sqlqueue.worker.maintenance.cleaner import CleanerConfig
from django_sqlqueue.worker.maintenance.expirer import ExpirerConfig
from django_sqlqueue.worker.maintenance.leader import LeaderConfig
from django_sqlqueue.worker.maintenance.reaper import ReaperConfig
from django_sqlqueue.worker.maintenance.rescuer import RescuerConfig
from django_sqlqueue.worker.maintenance.steps import InvalidStepConfig

DEFAULTS = QueueSettings()


def test_step_defaults_are_the_settings_defaults():
    assert (ExpirerConfig().batch_size, RescuerConfig().batch_size, CleanerConfig().batch_size
            ) == (DEFAULTS.MAINTENANCE_BATCH_SIZE,) * 3 == (1000,) * 3
    timeout = DEFAULTS.MAINTENANCE_STATEMENT_TIMEOUT_SECONDS
    assert {ExpirerConfig().statement_timeout_seconds, RescuerConfig().statement_timeout_seconds,
            ReaperConfig().statement_timeout_seconds,
            CleanerConfig().statement_timeout_seconds} == {timeout} == {10.0}
    cleaner = CleanerConfig()
    assert (cleaner.keep_succeeded_seconds, cleaner.keep_failed_seconds,
            cleaner.interval_seconds) == (DEFAULTS.KEEP_SUCCEEDED_SECONDS,
                                          DEFAULTS.KEEP_FAILED_SECONDS,
                                          DEFAULTS.PRUNE_INTERVAL_SECONDS)
    assert ReaperConfig().lease_seconds == DEFAULTS.LEASE_SECONDS
    assert LeaderConfig().term_seconds == 3 * DEFAULTS.MAINTENANCE_INTERVAL_SECONDS


@pytest.mark.parametrize("make, message", [
    (lambda: ExpirerConfig(batch_size=0), "ExpirerConfig: batch_size must be more than 0"),
    (lambda: RescuerConfig(statement_timeout_seconds=-1),
     "statement_timeout_seconds must be more than 0 or None"),
    (lambda: CleanerConfig(keep_succeeded_seconds=0), "keep_succeeded_seconds must be more than"),
    (lambda: CleanerConfig(run_seconds=0), "run_seconds must be more than 0"),
    (lambda: CleanerConfig(pause_seconds=-0.1), "pause_seconds must be 0 or more"),
    (lambda: CleanerConfig(backlog_pause_ratio=-1), "backlog_pause_ratio must be 0 or more"),
    (lambda: CleanerConfig(backlog_after_seconds=0), "backlog_after_seconds must be more than 0"),
    (lambda: CleanerConfig(batch_size=True), "batch_size must be more than 0, not True"),
    (lambda: ReaperConfig(silent_leases=0.5), "silent_leases must be at least 1"),
    (lambda: ReaperConfig(lease_seconds="30"), "lease_seconds must be more than 0"),
    (lambda: LeaderConfig(term_seconds=0), "term_seconds must be more than 0"),
    (lambda: LeaderConfig(holder=""), "holder must be 1 to 255 characters"),
], ids=["expirer-batch", "rescuer-timeout", "cleaner-keep", "cleaner-run", "cleaner-pause",
        "cleaner-backlog-ratio", "cleaner-backlog-after", "cleaner-bool", "reaper-silence",
        "reaper-lease", "leader-term", "leader-holder"])
def test_a_bad_step_config_is_refused_naming_the_field(make, message):
    with pytest.raises(InvalidStepConfig, match=message):
        make()


def test_none_keeps_and_no_limit_are_accepted():
    CleanerConfig(keep_succeeded_seconds=None, keep_failed_seconds=None,
                  statement_timeout_seconds=None)


@pytest.mark.parametrize("sqlqueue, message", [
    ({"MAINTENANCE_BATCH_SIZE": 0}, "MAINTENANCE_BATCH_SIZE must be from 1 to 100,000"),
    ({"MAINTENANCE_BATCH_SIZE": 1_000_000}, "MAINTENANCE_BATCH_SIZE must be from 1 to 100,000"),
    ({"MAINTENANCE_BATCH_SIZE": 10.0}, "SQLQUEUE['MAINTENANCE_BATCH_SIZE'] must be int"),
    ({"MAINTENANCE_STATEMENT_TIMEOUT_SECONDS": 0},
     "MAINTENANCE_STATEMENT_TIMEOUT_SECONDS must be positive or None"),
    ({"MAINTENANCE_STATEMENT_TIMEOUT_SECONDS": "10"},
     "SQLQUEUE['MAINTENANCE_STATEMENT_TIMEOUT_SECONDS'] must be int or float or None"),
    ({"PRUNE_INTERVAL_SECONDS": -1}, "PRUNE_INTERVAL_SECONDS must be positive"),
])
def test_bad_maintenance_settings_are_refused(settings, sqlqueue, message):
    settings.SQLQUEUE = sqlqueue
    with pytest.raises(ImproperlyConfigured, match=message.replace("[", r"\[").replace("]", r"\]")):
        get_settings()


def test_maintenance_settings_apply(settings):
    settings.SQLQUEUE = {"MAINTENANCE_BATCH_SIZE": 50, "PRUNE_INTERVAL_SECONDS": 60,
                        "MAINTENANCE_STATEMENT_TIMEOUT_SECONDS": None}
    conf = get_settings()
    assert (conf.MAINTENANCE_BATCH_SIZE, conf.PRUNE_INTERVAL_SECONDS,
            conf.MAINTENANCE_STATEMENT_TIMEOUT_SECONDS) == (50, 60, None)


# ---- which process table ----------------------------------------------------------------------
def test_only_a_known_and_equal_table_is_the_same():
    here = identity.ProcessTable("boot", 7)
    assert here.same_as("boot", 7)
    assert not here.same_as("boot", 8) and not here.same_as("other", 7)
    assert not identity.ProcessTable(None, 7).same_as(None, 7)  # unknown is never "the same"
    assert not identity.ProcessTable("boot", None).same_as("boot", None)


@pytest.mark.skipif(not os.path.exists(identity.BOOT_ID_PATH), reason="Linux only")
def test_on_linux_this_process_knows_its_table():
    table = identity.current()
    assert table.known and len(table.boot_id) == 36
    assert table.pid_namespace == os.stat("/proc/self/ns/pid").st_ino


def test_where_proc_is_missing_the_table_is_unknown(monkeypatch):
    monkeypatch.setattr(identity, "BOOT_ID_PATH", "/nonexistent/boot_id")
    monkeypatch.setattr(identity, "PID_NAMESPACE_PATH", "/nonexistent/ns/pid")
    assert identity.current() == identity.ProcessTable(None, None)


def test_pid_alive():
    assert identity.pid_alive(os.getpid())
    assert not identity.pid_alive(2**22 + 12345)
    assert identity.pid_alive(0)  # a process group, not a process: never judged dead
