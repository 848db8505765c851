"""Counting, not guessing: loss, duplicates and overlaps, read from the Job and Run tables.

Every chaos job writes a ``Run`` row keyed by (job id, attempt) when it starts and sets its
``finished_at`` when it ends. After a scenario, :func:`tally` compares those rows with the jobs:

- **lost**: a job that did not end ``succeeded``, or whose successful attempt left no finished
  ``Run`` (the queue says it ran, the side effect says otherwise).
- **duplicate**: every ``Run`` beyond the first of a job: its side effect happened more than once.
- **hand-off check** ("never two executions of one job at the same time while a lease holds"):
  for each run that was followed by another run of the same job, the queue must have ended that
  attempt with an error entry (``Job.errors``, e.g. ``WorkerLost`` written by the rescue), and the
  next run must have started after that entry's time. With ``killed`` (pid -> time of SIGKILL),
  the entry must also be a ``WorkerLost`` of a worker we killed, written after the kill: the
  queue only took a job away from a worker that was dead, never from one whose lease still held.
"""

import datetime as dt
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.testapp.models import Run

#: Error types by which the queue may end an attempt in the database scenarios.
DATABASE_CAUSES = ("OperationalError", "InterfaceError", "WorkerLost")


@dataclass
class Tally:
    jobs: int = 0
    executions: int = 0
    lost: list = field(default_factory=list)  # (job id, why)
    duplicates: int = 0
    causes: Counter = field(default_factory=Counter)  # why each duplicate happened
    problems: list = field(default_factory=list)  # hand-off violations, with the evidence
    rescued: int = 0  # attempts ended by the rescue (WorkerLost)
    most_interruptions: int = 0  # of any one job: how close a run came to max_interruptions

    def figures(self) -> dict:
        return {
            "jobs": self.jobs, "executions": self.executions, "lost": len(self.lost),
            "duplicates": self.duplicates, "duplicate_causes": dict(self.causes),
            "rescued_attempts": self.rescued, "most_interruptions": self.most_interruptions,
            "handoff_violations": len(self.problems),
        }

    def assert_clean(self):
        assert not self.lost, f"{len(self.lost)} job(s) lost, e.g. {self.lost[:5]}"
        assert not self.problems, (
            f"{len(self.problems)} hand-off violation(s):\n" + "\n".join(self.problems[:10])
        )


def _short(kind: str) -> str:
    return kind.rsplit(".", 1)[-1]


def _at(entry) -> dt.datetime:
    return dt.datetime.fromisoformat(entry["at"])


def _pid(claimed_by: str):
    parts = (claimed_by or "").split(":")
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else None


def tally(job_ids=None, *, killed=None, causes=DATABASE_CAUSES, using="default") -> Tally:
    """Count loss and duplicates of the given jobs (default: every job) in the database
    ``using``. See the module doc."""
    jobs = Job.objects.using(using)
    jobs = jobs.all() if job_ids is None else jobs.filter(pk__in=list(job_ids))
    jobs = {job.pk: job for job in jobs.only("status", "attempts", "interruptions", "errors")}
    runs = defaultdict(list)
    for run in (Run.objects.using(using).filter(job_id__in=list(jobs))
                .order_by("job_id", "attempt")):
        runs[run.job_id].append(run)
    result = Tally(jobs=len(jobs), executions=sum(len(r) for r in runs.values()))
    for pk, job in jobs.items():
        errors = {entry["attempt"]: entry for entry in job.errors or []}
        result.rescued += sum(_short(e["type"]) == "WorkerLost" for e in errors.values())
        result.most_interruptions = max(result.most_interruptions, job.interruptions)
        _check_job(result, job, runs.get(pk, []), errors, killed, causes)
    return result


def unsucceeded(limit=5, *, fleet=None, using="default") -> str:
    """The jobs not (yet) succeeded, for a failed wait's message: how many, and the state,
    attempts, interruptions, lease and last error entry of the first ``limit``; with ``fleet``,
    the end of the output of the worker that holds the first of them."""
    jobs = Job.objects.using(using).exclude(status=JobStatus.SUCCEEDED).order_by("pk")
    lines = [f"{jobs.count()} job(s) not succeeded"]
    for job in jobs[:limit]:
        last = (job.errors or [{}])[-1]
        lines.append(
            f"  job {job.pk}: {job.status}, attempt {job.attempts} of {job.max_attempts}, "
            f"interruptions {job.interruptions} of {job.max_interruptions}, run_at "
            f"{job.run_at:%H:%M:%S.%f}, claimed_by {job.claimed_by}, lease until "
            f"{job.lease_expires_at and f'{job.lease_expires_at:%H:%M:%S.%f}'}, last error: "
            f"{last.get('type')} {last.get('message', '')[:200]}")
    first = jobs.first()
    if fleet is not None and first is not None and _pid(first.claimed_by):
        lines.append(fleet.output_of(_pid(first.claimed_by)))
    return "\n".join(lines)


def _check_job(result, job, runs, errors, killed, causes):
    final = [run for run in runs if run.attempt == job.attempts and run.finished_at is not None]
    if job.status != JobStatus.SUCCEEDED:
        last = (job.errors or [{}])[-1].get("message", "no error recorded")
        result.lost.append((job.pk, f"ended {job.status} after {job.attempts} attempt(s): "
                                    f"{last}"))
    elif not final:
        result.lost.append((job.pk, f"succeeded, but attempt {job.attempts} left no finished run"))
    for run in runs:
        if run.attempt > job.attempts:
            result.problems.append(f"job {job.pk}: a run of attempt {run.attempt}, which the "
                                   f"queue never granted (attempts={job.attempts})")
    for earlier, later in zip(runs, runs[1:], strict=False):
        result.duplicates += 1
        problem, cause = _handoff(job, earlier, later, errors.get(earlier.attempt), killed, causes)
        result.causes[cause] += 1
        if problem:
            result.problems.append(problem)


def _handoff(job, earlier, later, entry, killed, causes):
    """Why ``later`` ran after ``earlier``; (problem or None, cause)."""
    where = f"job {job.pk} attempts {earlier.attempt}->{later.attempt}"
    if entry is None:
        return f"{where}: attempt {earlier.attempt} ran and was never ended by the queue", "none"
    kind = _short(entry["type"])
    if _at(entry) > later.started_at:
        return (f"{where}: the next run started at {later.started_at.isoformat()}, before the "
                f"queue ended attempt {earlier.attempt} at {entry['at']} ({kind})"), kind
    if killed is None:
        if kind not in causes:
            return f"{where}: attempt {earlier.attempt} ended by {kind}, not by the chaos", kind
        return None, kind
    pid = _pid(entry.get("worker") or earlier.worker)
    if kind != "WorkerLost" or pid not in killed:
        return (f"{where}: attempt {earlier.attempt} was taken from worker {earlier.worker}, "
                f"which was not killed ({kind}: {entry['message']})"), kind
    # The reaper checks the pid after stamping its pass, so "no longer exists" is proof enough;
    # any other rescue (an expired lease) must come after the kill.
    if _at(entry) < killed[pid] and "no longer exists" not in entry["message"]:
        return (f"{where}: taken from worker {earlier.worker} at {entry['at']}, while it was "
                f"alive (killed only at {killed[pid].isoformat()}): {entry['message']}"), kind
    if earlier.finished_at is None:
        return None, "worker killed mid-job"
    return None, "worker killed after the side effect, before recording success"
