"""Run the scenarios for one system, inside that system's virtualenv; print JSON on stdout.

    python -m benchmarks.driver SYSTEM CONFIG_JSON [--setup-only | --enqueue-many N]

CONFIG_JSON: {"dsn": ..., "sizes": {...}, "scenarios": [...], "logdir": ...}, the dsn a
``postgresql://`` or ``mysql://`` (MariaDB) URL. The orchestrator (benchmarks/run.py) calls this;
running it by hand is handy for one system.
"""

import importlib
import json
import sys
from pathlib import Path

from . import harness


def main(argv) -> int:
    name, config = argv[0], json.loads(argv[1])
    module = importlib.import_module(f"benchmarks.systems.{name}")
    logdir = Path(config["logdir"])
    logdir.mkdir(parents=True, exist_ok=True)
    system = module.System(config["dsn"], logdir)
    if "--setup-only" in argv:
        system.setup()
        return 0
    if "--enqueue-many" in argv:
        return enqueue_many(system, int(argv[argv.index("--enqueue-many") + 1]))
    result = harness.run(system, config["sizes"], config["scenarios"], config)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


def enqueue_many(system, n: int) -> int:
    """One process of the concurrent-enqueue scenario: warm up, say "ready", wait for "go" on
    stdin, enqueue ``n`` jobs one per transaction, print their times as JSON."""
    import time

    system.after_fork()
    for i in range(5):
        system.enqueue_one(i)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    times = []
    for i in range(n):
        started = time.perf_counter()
        system.enqueue_one(i)
        times.append(time.perf_counter() - started)
    print(json.dumps({"times": times}), flush=True)
    system.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
