"""The workflow scenarios (issue 26): a fan-out + fan-in and a long chain, for the systems that
have workflows (django-sqlqueue's chord and chain, Celery's); the others are n/a.

- ``fanin``: a group of ``fanin_jobs`` no-op jobs (job ``i`` returns ``i + 1``) with a callback
  that runs once all of them succeeded and gets their results (a chord; it records how many
  results it got that are not None, which proves every job succeeded before it), enqueued in
  one call while W workers wait. The callback records the moment it starts; the time to the
  callback runs from the enqueue's return (django-sqlqueue: its commit; Celery: every message
  sent) to that moment. Also reported: the enqueue's own time, the time from the enqueue's
  start, and the group's rate (jobs over the time to the callback).
- ``chain``: a chain of ``chain_steps`` no-op steps, each given the result of the one before
  (step ``k`` returns ``k``; the last step records its start and the value it got, which proves
  the results were passed). Total time from the enqueue's return to the last step's start, and
  the per-step overhead: that time over the steps (the steps do nothing, so it is all overhead).

Before each timed run the workers run a tiny one (2 jobs), so they are up and warm; the
moments are recorded with :func:`processes.record_pickup` in the workers and ``time.time()`` here
(one machine, one clock).

A system takes part by mixing in :class:`WorkflowSystem` and filling in its hooks.
"""

import os
import tempfile
import time
from pathlib import Path

from . import processes


class WorkflowSystem:
    """The hooks of the workflow scenarios. Each enqueue hook enqueues the whole workflow in one
    call, returns once it is committed (or sent), and its last step calls
    ``record_pickup(f"{tag}:{value}")`` as its first action: ``value`` is the number of results
    the callback got (``fanin``) or the result the last step got (``chain``)."""

    has_workflows = True

    #: A line under the workflow table: how the system's workflows are set up.
    workflow_note = ""

    def enqueue_fanin(self, n: int, tag: str) -> None:
        """A group of ``n`` no-op jobs (job ``i`` returns ``i + 1``) and a callback given their
        ``n`` results."""
        raise NotImplementedError

    def enqueue_chain(self, n: int, tag: str) -> None:
        """A chain of ``n`` steps: the first returns 1, each next one its argument plus 1, the
        last records the value it got (``n - 1``)."""
        raise NotImplementedError

    def workflow_worker_specs(self, processes: int) -> list:
        """The workers of the workflow scenarios: by default those of the other scenarios."""
        return self.worker_specs(processes)


def _moments(path: str) -> dict:
    """{key: the first time recorded for it} from a record_pickup file."""
    moments = {}
    for line in Path(path).read_text().splitlines():
        key, at = line.split()
        moments.setdefault(key, float(at))
    return moments


def _wait_for(path: str, key: str, workers, cap: float, what: str) -> float:
    deadline = time.monotonic() + cap
    while True:
        moment = _moments(path).get(key)
        if moment is not None:
            return moment
        if not workers.alive():
            raise RuntimeError(f"{what}: a worker process exited; see its log")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: no {key!r} within {cap:.0f}s (the time cap)")
        time.sleep(0.05)


def _timed(runner, scenario: str, size: int, expected) -> dict | None:
    """Start W workers, warm them up with a run of 2, then time one run of ``size``:
    {"enqueue_s", "to_last_s" (from the enqueue's return), "from_start_s"}; None for a system
    without workflows."""
    system = runner.system
    if not getattr(system, "has_workflows", False):
        return None
    enqueue = getattr(system, f"enqueue_{scenario}")
    sizes = runner.sizes
    cap = sizes["workflow_cap_s"]
    system.reset()
    fd, path = tempfile.mkstemp(prefix=f"{scenario}-", suffix=".txt")
    os.close(fd)
    os.chmod(path, 0o666)
    specs = [(argv, {**env, "BENCH_PICKUP_FILE": path})
             for argv, env in system.workflow_worker_specs(sizes["processes"])]
    workers = processes.Workers(specs, system.logdir, scenario)
    try:
        enqueue(2, "warm")
        _wait_for(path, f"warm:{expected(2)}", workers, cap, f"{scenario} warm-up")
        system.reset()
        started = time.time()
        enqueue(size, "run")
        sent = time.time()
        last = _wait_for(path, f"run:{expected(size)}", workers, cap, scenario)
    finally:
        workers.stop()
        os.unlink(path)
    system.reset()
    return {"enqueue_s": sent - started, "to_last_s": last - sent,
            "from_start_s": last - started, "processes": sizes["processes"],
            "note": system.workflow_note}


def fanin(runner) -> dict | None:
    n = runner.sizes["fanin_jobs"]
    result = _timed(runner, "fanin", n, lambda size: size)
    if result is None:
        return None
    return {"jobs": n, **result, "time_to_callback_s": result["to_last_s"],
            "jobs_per_s": n / result["to_last_s"]}


def chain(runner) -> dict | None:
    n = runner.sizes["chain_steps"]
    result = _timed(runner, "chain", n, lambda size: size - 1)
    if result is None:
        return None
    return {"steps": n, **result, "total_s": result["to_last_s"],
            "per_step_ms": result["to_last_s"] / n * 1000}


SCENARIOS = {"fanin": fanin, "chain": chain}

# ---- the report (run.py) ------------------------------------------------------------------------
#: (row label, scenario, key, format, higher is better)
METRICS = [
    ("Fan-out + fan-in: enqueue of the group and callback (s)", "fanin", "enqueue_s", "{:,.2f}",
     False),
    ("Fan-out + fan-in: enqueue's return → callback's start (s)", "fanin", "time_to_callback_s",
     "{:,.2f}", False),
    ("Fan-out + fan-in: the group's rate (jobs/s)", "fanin", "jobs_per_s", "{:,.0f}", True),
    ("Fan-out + fan-in: enqueue's start → callback's start (s)", "fanin", "from_start_s",
     "{:,.2f}", False),
    ("Chain: enqueue (s)", "chain", "enqueue_s", "{:,.2f}", False),
    ("Chain: enqueue's return → last step's start (s)", "chain", "total_s", "{:,.2f}", False),
    ("Chain: per-step overhead (ms)", "chain", "per_step_ms", "{:,.2f}", False),
]


def _cell(result: dict, scenario: str, key: str, fmt: str) -> str:
    if "error" in result:
        return "n/a"
    value = result.get(scenario)
    if not isinstance(value, dict):
        return "n/a"  # the system has no workflows, or the scenario did not run
    if "error" in value:
        return "error"
    return fmt.format(value[key])


def report_lines(results: list, labels: dict, sizes: dict) -> list:
    """The workflow table of one phase (PostgreSQL's or MariaDB's), with django-sqlqueue's
    ratio against each peer (above 1.00x: django-sqlqueue is better); [] if neither scenario
    ran."""
    if not any(isinstance(r.get(s), dict) for r in results for s in SCENARIOS):
        return []
    ran = list(results)  # a system without workflows: n/a
    names = [r["system"] for r in ran]
    lines = [f"Workflows (W={sizes.get('processes')} worker processes; a group of "
             f"{sizes.get('fanin_jobs', 0):,} no-op jobs with a callback, a chain of "
             f"{sizes.get('chain_steps', 0):,} no-op steps each given the one before's "
             "result):", "",
             "| | " + " | ".join(labels.get(n, n) for n in names) + " |",
             "|" + "---|" * (len(names) + 1)]
    for label, scenario, key, fmt, _ in METRICS:
        lines.append(f"| {label} | "
                     + " | ".join(_cell(r, scenario, key, fmt) for r in ran) + " |")
    lines.append("")
    ours = next((r for r in ran if r["system"] == "sqlqueue"), None)
    peers = [r for r in ran if r["system"] != "sqlqueue"]
    if ours and peers:
        lines += ["django-sqlqueue against each peer (above 1.00x: django-sqlqueue is better):",
                  "", "| | " + " | ".join(f"vs {labels.get(r['system'])}" for r in peers) + " |",
                  "|" + "---|" * (len(peers) + 1)]
        for label, scenario, key, _, higher in METRICS:
            cells = []
            for peer in peers:
                mine, theirs = (r.get(scenario) for r in (ours, peer))
                if not all(isinstance(v, dict) and v.get(key) for v in (mine, theirs)):
                    cells.append("n/a")
                    continue
                ratio = (mine[key] / theirs[key] if higher else theirs[key] / mine[key])
                cells.append(f"{ratio:.2f}x")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    for note in dict.fromkeys(r.get(s, {}).get("note") for r in ran for s in SCENARIOS
                              if isinstance(r.get(s), dict)):
        if note:
            lines.append(f"- {note}")
    for result in ran:
        for scenario in SCENARIOS:
            error = (result.get(scenario) or {}).get("error")
            if error:
                lines.append(f"- {labels.get(result['system'])} {scenario}: error: "
                             f"{error.splitlines()[0]}")
    return lines
