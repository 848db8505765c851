"""What an orchestrator's probes ask (docs/operations.md, "Health probes"): is this host's worker
alive, and may this process take work? Read by ``manage.py healthcheck`` and the health views.

- **live**: every worker process of this host (or the ones named) has beaten within its lease.
  A worker beats every LEASE_SECONDS / 3 from a thread of its own, so a fresh beat says the
  process runs and reaches the database. Rows of processes that are gone (their pid no longer
  exists in this process table, worker/identity.py) are left out: maintenance reaps them. While
  the database does not answer, liveness is *unknown*: a worker waits for its database, and a
  restart would not bring it back sooner.
- **ready**: the jobs database answers and has every migration of this app applied; with
  ``SQLQUEUE["VERSION"]`` set, every worker of this host (or the ones named) also runs that
  version: a worker that started before the code was deployed has not loaded it.
"""

import socket
from dataclasses import dataclass, field

from django.db import DatabaseError

from ..checks import migrations_problem
from ..conf import get_settings
from ..db.clock import database_now
from ..models import Worker
from . import identity

LIVE, READY = "live", "ready"
HEALTHY, UNHEALTHY, UNKNOWN = "healthy", "unhealthy", "unknown"


@dataclass
class Report:
    """One probe's answer: ``status`` (healthy, unhealthy or unknown) and why."""

    probe: str
    status: str
    problems: list = field(default_factory=list)  # one line each, when not healthy
    workers: list = field(default_factory=list)  # live: each worker judged, as a dict

    def as_dict(self) -> dict:
        return {"probe": self.probe, "status": self.status, "problems": self.problems,
                "workers": self.workers}


def liveness(alias: str, *, names=None, name_prefix=None, host=None) -> Report:
    """Judge the workers named (``names``: ``Worker.name`` values), else those whose name starts
    with ``name_prefix`` (``runworker --name``), else those of ``host`` (this host by default)."""
    rows, whose = _workers(alias, names, name_prefix, host)
    try:
        now = database_now(alias)
        found = _running(rows)
    except DatabaseError as exc:
        return Report(LIVE, UNKNOWN, [f"the database does not answer ({_first_line(exc)}): "
                                      "cannot read the heartbeats"])
    judged = []
    for worker in found:
        lease = worker.lease_seconds or get_settings().LEASE_SECONDS
        age = (now - worker.last_heartbeat_at).total_seconds()
        judged.append({"name": worker.name, "pid": worker.pid, "heartbeat_age_seconds":
                       round(age, 3), "lease_seconds": lease, "fresh": age <= lease,
                       "version": worker.version})
    if not judged:
        return Report(LIVE, UNHEALTHY, [f"no running worker of {whose} is registered"])
    problems = [f"worker {w['name']}: last heartbeat {w['heartbeat_age_seconds']:g}s ago, "
                f"more than its lease of {w['lease_seconds']:g}s" for w in judged if not w["fresh"]]
    return Report(LIVE, UNHEALTHY if problems else HEALTHY, problems, judged)


def readiness(alias: str, *, names=None, name_prefix=None, host=None) -> Report:
    """The jobs database answers and has this app's migrations; the workers chosen as for
    ``liveness`` run ``SQLQUEUE["VERSION"]`` if it is set."""
    try:
        problem = migrations_problem(alias)
        version = get_settings().VERSION
        behind = [] if version is None else [
            worker for worker in _running(_workers(alias, names, name_prefix, host)[0])
            if worker.version != version]
    except DatabaseError as exc:
        return Report(READY, UNHEALTHY, [f"the jobs database {alias!r} does not answer "
                                         f"({_first_line(exc)})"])
    if problem is not None:
        return Report(READY, UNHEALTHY, [problem])
    if behind:
        return Report(READY, UNHEALTHY, [
            f"worker {worker.name} runs version {worker.version!r}, the code here is "
            f"{version!r} (SQLQUEUE['VERSION']): restart it to load the code deployed"
            for worker in behind],
            [{"name": worker.name, "pid": worker.pid, "version": worker.version}
             for worker in behind])
    return Report(READY, HEALTHY)


def _workers(alias, names, name_prefix, host):
    """The rows of the workers chosen (see ``liveness``), and how to name them in a problem."""
    rows = Worker.objects.using(alias)
    if names is not None:
        return rows.filter(name__in=list(names)), "this process"
    if name_prefix:
        return rows.filter(name__startswith=f"{name_prefix}:"), f"name {name_prefix!r}"
    host = host or socket.gethostname()
    return rows.filter(host=host), f"host {host!r}"


def _running(rows) -> list:
    """``rows`` but those of processes gone from this process table (maintenance reaps them)."""
    table = identity.current()
    return [worker for worker in rows
            if not (table.same_as(worker.boot_id, worker.pid_namespace)
                    and not identity.pid_alive(worker.pid))]


def _first_line(exc) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
