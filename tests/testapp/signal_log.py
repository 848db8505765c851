"""Receivers of the ``@job`` signals that append one JSON line per signal to the file named by
SQLQUEUE_TEST_SIGNAL_LOG: a worker subprocess imports this module when its TASK_MODULES name it
(tests/process/test_signals_across_workers.py)."""

import json
import os
import threading

from django_sqlqueue import signals

PATH = os.environ.get("SQLQUEUE_TEST_SIGNAL_LOG")
_lock = threading.Lock()


def _recorder(name):
    def record(sender, job, **kwargs):
        line = {
            "signal": name, "job": job.pk, "status": job.status, "attempts": job.attempts,
            "thread": threading.current_thread().name,
            **{key: str(value) if key in ("outcome", "exception") else value
               for key, value in kwargs.items()
               if key in ("outcome", "exception", "will_retry", "reason")},
        }
        with _lock, open(PATH, "a") as log:
            log.write(json.dumps(line) + "\n")

    record.__qualname__ = f"record_{name}"
    return record


if PATH:
    for _name in ("job_enqueued", "job_started", "job_finished", "job_retried", "job_rescued"):
        getattr(signals, _name).connect(_recorder(_name), weak=False)
