"""One enqueuing process of tests/chaos/test_failover.py, as a web process would enqueue: one job
per transaction (autocommit), and an enqueue that raised is tried again, as a user would submit
the form again.

    python -m tests.chaos.enqueuer NAME COUNT OUT [--max-pause-ms N] [--deadline-seconds N]

Each line of OUT is written (and flushed) once its enqueue returned or raised:
``ack JOB_ID KEY T`` for an enqueue that returned (acknowledged: its commit returned), ``error KEY
T MESSAGE`` for one that raised (its commit may or may not have happened). T is
``time.monotonic()``, which every process of the machine shares. Keys are ``NAME-N``; a retry
keeps its key, so a raised enqueue that committed anyway shows up as a second job of that key.
"""

import argparse
import os
import random
import sys
import time


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("count", type=int)
    parser.add_argument("out")
    parser.add_argument("--max-pause-ms", type=float, default=0)
    parser.add_argument("--deadline-seconds", type=float, default=300)
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.db import DatabaseError, connection

    from tests.testapp.jobs import work

    deadline = time.monotonic() + args.deadline_seconds
    with open(args.out, "w") as out:
        for n in range(args.count):
            key = f"{args.name}-{n}"
            while True:
                if time.monotonic() > deadline:
                    sys.exit(f"enqueuer {args.name}: deadline passed at {key}")
                try:
                    job = work.enqueue(key=key, max_sleep_ms=10)
                except DatabaseError as exc:
                    out.write(f"error {key} {time.monotonic():.6f} {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}\n")
                    out.flush()
                    connection.close()  # a new connection finds the writable server
                    time.sleep(0.05)
                    continue
                out.write(f"ack {job.pk} {key} {time.monotonic():.6f}\n")
                out.flush()
                break
            if args.max_pause_ms:
                time.sleep(random.uniform(0, args.max_pause_ms) / 1000)


if __name__ == "__main__":
    main()
