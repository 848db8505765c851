"""Write the figures of chaos-suite reports (the JSON that tests/chaos writes to
$SQLQUEUE_RELIABILITY_REPORT) into docs/reliability.md, between its "figures" markers. Run by
scripts/reliability.sh.

    python scripts/render_reliability.py DOC REPORT.json [REPORT.json ...]

Refuses (exit 1) a report whose run did not pass: the page only ever shows figures of green runs.
"""

import json
import sys
from pathlib import Path

START, END = "<!-- figures:start -->", "<!-- figures:end -->"
#: The scenarios as numbered in docs/reliability.md (and issue 6).
NUMBERS = {"kills": 1, "restarts": 2, "terminations": 3, "transactional enqueue": 4,
           "scheduled jobs": 5, "retry delays": 5, "bad input": 6, "state machine": 7,
           "security": 8, "failover (synchronous)": 9, "failover (asynchronous)": 9}
CAUSES = {
    "worker killed mid-job": "killed mid-job",
    "worker killed after the side effect, before recording success":
        "killed after the job's side effect, before its success was written",
    "OperationalError": "the job's own database write failed in the outage: attempt recorded "
                        "interrupted, run again",
    "InterfaceError": "the job's connection was closed in the outage: attempt recorded "
                      "interrupted, run again",
    "WorkerLost": "its lease ran out during the outage: rescued, run again",
}


def why(entry) -> str:
    causes = entry.get("duplicate_causes") or {}
    return "; ".join(f"{n} {CAUSES.get(cause, cause)}" for cause, n in causes.items()) or "-"


def chaos_row(entry) -> str:
    scenario = entry["scenario"]
    jobs = f"{entry['jobs']:,}"
    workers = str(entry.get("workers", 3))
    if entry.get("concurrency"):
        workers += f" (threads {entry['concurrency']})"
    chaos = {
        "kills": f"{entry.get('kills', 0)} SIGKILLs, each worker restarted",
        "restarts": f"{entry.get('restarts', 0)} × `pg_ctl restart -m fast`",
        "terminations": f"{entry.get('terminated_connections', 0)} connections terminated in "
                        f"{entry.get('rounds', 0)} rounds of `pg_terminate_backend`",
        "transactional enqueue": f"{entry.get('enqueues', 0):,} enqueues, "
                                 f"{entry.get('rolled_back', 0)} rolled back",
    }.get(scenario) or _failover(entry)
    exits = entry.get("worker_exits", "-")
    return (f"| {NUMBERS[scenario]}. {scenario} | {jobs} | {workers} | {chaos} | "
            f"{entry['executions']:,} | **{entry['lost'] + entry.get('lost_acknowledged', 0)}** | "
            f"{entry['duplicates']} | "
            f"{why(entry)} | {entry['handoff_violations']} | {exits} | {entry['seconds']} s |")


def _failover(entry) -> str:
    return (f"primary SIGKILLed under {entry['enqueuers']} processes enqueuing one job per "
            f"transaction, standby promoted {entry['promoted_after_seconds']} s later; "
            f"{entry['acknowledged']:,} enqueues acknowledged, {entry['lost_acknowledged']} of "
            f"them missing after the failover; enqueues resumed "
            f"{entry['enqueues_resumed_after_seconds']} s after the crash")


def check_row(entry) -> str:
    return f"| {NUMBERS.get(entry['scenario'], '')}. {_check_row(entry)[2:]}"


def _check_row(entry) -> str:
    vendor = entry["vendor"]
    scenario = entry["scenario"]
    if scenario in ("scheduled jobs", "retry delays"):
        early = entry.get("started_early", entry.get("retried_early"))
        count = entry.get("retries") or entry["jobs"]
        what = "scheduled jobs" if scenario == "scheduled jobs" else "retries"
        return (f"| {scenario} | {vendor} | {count} {what}: **{early} early**; latest "
                f"{entry['max_late_seconds']} s late (tolerance {entry['tolerance_seconds']} s) |")
    if scenario == "bad input":
        return (f"| bad input | {vendor} | {entry['cases']} cases ({entry['enqueue']} enqueue, "
                f"{entry['sql_refused']} refused SQL rows, {entry['sql_broken']} broken SQL rows, "
                f"{entry['settings']} settings, {entry['options']} command options): "
                f"**{entry['cases'] - entry.get('known_bugs', 0)} handled as promised** |")
    if scenario == "state machine":
        return (f"| state machine | {vendor} | {entry['examples']} random histories, "
                f"{entry['steps']} states checked, {entry['claims']} claims, "
                f"{entry['rescued']} lease rescues, {entry['stale_writes_refused']} stale writes "
                f"refused: **{entry['illegal_states']} illegal states** |")
    if scenario == "security":
        return (f"| security | {vendor} | {entry['dangerous_task_names']} rows naming os.system, "
                f"eval & co.: **{entry['executed']} executed**; {entry['sql_call_sites']} SQL "
                f"call sites pass parameters; {entry['sql_assembly_sites']} SQL assembly sites "
                "use reviewed names only |")
    return f"| {scenario} | {vendor} | {json.dumps(entry)} |"


def render(reports) -> str:
    entries = sorted((e for r in reports for e in r["scenarios"]),
                     key=lambda e: (NUMBERS.get(e["scenario"], 99), e["scenario"], e["vendor"]))
    chaos = [e for e in entries if "executions" in e]
    checks = [e for e in entries if "executions" not in e]
    first = reports[0]
    mode = "soak sizes (SQLQUEUE_SOAK=1)" if first["soak"] else "CI sizes"
    databases = ", ".join(sorted({r["database"] for r in reports}))
    lines = [
        START,
        f"Last run: {first['generated_at']}, `{first['command']}`, {mode}; commit "
        f"{first['commit']}; {first['machine']}; Python {first['python']}, Django "
        f"{first['django']}; {databases}.",
        "",
        "| Scenario | Jobs | Workers | Chaos | Executions | Lost | Duplicates | Why the "
        "duplicates | Hand-off violations | Worker exits | Time |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *(chaos_row(e) for e in chaos),
        "",
        "| Check | Database | Result |",
        "|---|---|---|",
        *(check_row(e) for e in checks),
        END,
    ]
    return "\n".join(lines)


def main(doc, *paths):
    reports = [json.loads(Path(p).read_text()) for p in paths]
    failed = [p for p, r in zip(paths, reports, strict=True) if not r["passed"]]
    if failed:
        sys.exit(f"not rendering: the run behind {', '.join(failed)} did not pass")
    text = Path(doc).read_text()
    if START not in text or END not in text:
        sys.exit(f"{doc} has no {START} ... {END} section to fill")
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    Path(doc).write_text(before + render(reports) + after)
    print(f"wrote the figures of {len(paths)} report(s) into {doc}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
