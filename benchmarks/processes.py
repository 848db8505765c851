"""The processes a benchmark measures, shared by the harness and the scenarios kept beside it
(workflows.py): progress lines, percentiles, the pickup record, the process tree's CPU time and
memory, and :class:`Workers`. Standard library only, like the harness."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the project checkout (benchmarks' parent)


# ---- helpers ------------------------------------------------------------------------------------
def log(message: str) -> None:
    """Progress goes to stderr: stdout carries the JSON result only."""
    print(f"    [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(values, q: float):
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def record_pickup(key) -> None:
    """Called by the pickup task of every system as its first action: appends ``key time``."""
    path = os.environ.get("BENCH_PICKUP_FILE")
    if path:
        line = f"{key} {time.time():.6f}\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def _children() -> dict:
    """pid -> parent pid for every process, from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            parents[int(entry)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    return parents


def tree_pids(roots) -> list:
    parents = _children()
    found = [pid for pid in roots if pid in parents]
    index = 0
    while index < len(found):
        pid = found[index]
        found.extend(child for child, parent in parents.items() if parent == pid)
        index += 1
    return found


def cpu_seconds(roots) -> float:
    """CPU time (user and system) used so far by the processes in the trees under ``roots``,
    seconds: on a shared machine, a cost that other work there changes far less than the
    wall time (a process that waits for a core uses none)."""
    ticks = 0
    for pid in tree_pids(roots):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def tree_rss(roots) -> dict:
    """Resident memory of each process in the trees under ``roots``, MB."""
    return {pid: rss_mb(pid) for pid in tree_pids(roots)}


# ---- workers ------------------------------------------------------------------------------------
class Workers:
    """The worker processes of one scenario: started in their own sessions, stopped with SIGTERM
    (then SIGKILL), their output kept in a log file for post-mortems."""

    def __init__(self, specs, logdir: Path, label: str):
        self.procs = []
        self.logs = []
        for index, (argv, env) in enumerate(specs):
            logfile = open(logdir / f"{label}-{index}.log", "w")
            self.logs.append(logfile)
            self.procs.append(
                subprocess.Popen(
                    argv, env={**os.environ, **env}, stdout=logfile, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=ROOT,
                )
            )

    @property
    def pids(self):
        return [proc.pid for proc in self.procs]

    def alive(self) -> bool:
        return all(proc.poll() is None for proc in self.procs)

    def stop(self, timeout=10.0):
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers and grandchildren
            except ProcessLookupError:
                pass
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        for logfile in self.logs:
            logfile.close()
