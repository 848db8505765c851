"""A start line for racing processes: each one says it is ready and waits for the go, which the
test gives once all of them are ready, so that they really start together however slowly a busy
machine starts them (a start time a few seconds ahead was passed, on 2 cores running other
test passes, before the last process had imported Django, and the first one ran alone).

In the process: ``wait_for_go(start_line, name)``; in the test: ``go(start_line, processes)``,
or ``race(...)``, which also starts the processes and reads what each reports.
"""

import json
import time
from pathlib import Path

# How long either side waits for the other: far beyond any start-up, still an end if the other
# side died.
TIMEOUT = 300


def wait_for_go(start_line: str, name: str) -> None:
    """In a racing process, after its set-up: ready, then wait for the go."""
    line = Path(start_line)
    (line / f"{name}.ready").touch()
    deadline = time.monotonic() + TIMEOUT
    while not (line / "go").exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: no go within {TIMEOUT}s")
        time.sleep(0.005)


def go(start_line: Path, processes: list, *, before=None) -> None:
    """In the test: once every process (subprocess.Popen objects) is ready, go; ``before``, a
    callable, runs between the two (to pick the moment of the go)."""
    deadline = time.monotonic() + TIMEOUT
    while len(list(Path(start_line).glob("*.ready"))) < len(processes):
        for proc in processes:
            if proc.poll() is not None:
                _, err = proc.communicate()
                raise AssertionError(f"a racing process exited before the start:\n{err}")
        assert time.monotonic() < deadline, f"the racing processes not ready in {TIMEOUT}s"
        time.sleep(0.05)
    if before is not None:
        before()
    (Path(start_line) / "go").touch()


def race(run_python, module: str, start_line: Path, *args, processes: int, prefix="racer",
         env=None, before=None, timeout=TIMEOUT) -> list:
    """Start ``processes`` racers, ``python -m module <prefix>-<n> <start_line> *args`` (the
    ``run_python`` fixture), give them the go together, and return the report each printed
    last (a line of JSON), in the order they were started; a racer that failed fails the test."""
    Path(start_line).mkdir(parents=True, exist_ok=True)
    racers = [run_python(module, f"{prefix}-{n}", str(start_line), *map(str, args), env=env)
              for n in range(processes)]
    go(start_line, racers, before=before)  # every process is up, connected and waiting by then
    reports = []
    for proc in racers:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports
