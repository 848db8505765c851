"""Housekeeping, one step per file: ``leader.py`` (the leader's term: which worker runs the
steps), ``expirer.py`` (jobs past ``expires_at``), ``rescuer.py`` (jobs whose lease ran out),
``reaper.py`` (dead workers), ``cleaner.py`` (pruning finished jobs), ``orphans.py`` (waiting
jobs whose parents are gone), ``rollup.py`` (throughput
per minute and hour). Each has a config dataclass and ``run_once(now=None)``; ``steps.py`` holds
what they share and ``service.py`` runs them every interval (``Maintenance``).
"""
