"""``runworker`` processes of the benchmark scripts that run django-sqlqueue's workers themselves
(prune_while_draining.py, sustained_load.py): started with their SQLQUEUE settings as JSON in
``BENCH_SQLQUEUE`` (read by prune_settings.py), stopped gracefully."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_workers(env, settings, logdir: Path, phase: str, options=()):
    """Two worker processes (``--processes 2``, and ``options`` of runworker), logging to
    ``logdir/<phase>-workers.log``."""
    log = open(logdir / f"{phase}-workers.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "django", "runworker", "--processes", "2", *options],
        cwd=ROOT, env={**env, "BENCH_SQLQUEUE": json.dumps(settings)}, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )
    return proc, log


def stop_workers(proc, log):
    proc.send_signal(2)  # SIGINT: a graceful stop
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
    log.close()
