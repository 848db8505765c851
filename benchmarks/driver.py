"""Run the scenarios for one system, inside that system's virtualenv; print JSON on stdout.

    python -m benchmarks.driver SYSTEM CONFIG_JSON [--setup-only]

CONFIG_JSON: {"dsn": ..., "sizes": {...}, "scenarios": [...], "logdir": ...}. The orchestrator
(benchmarks/run.py) calls this; running it by hand is handy for one system.
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
    result = harness.run(system, config["sizes"], config["scenarios"])
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
