"""The worker: one duty per module.

- ``config``: the options of one worker, validated.
- ``process``: one worker process: claims jobs into free slots and shuts down gracefully.
- ``pool``: the threads that run jobs, and which jobs they hold.
- ``heartbeat``: renews leases, updates the worker's row, fails jobs past their timeout.
- ``maintenance/``: one housekeeping step per module (the leader's term, expiring, rescuing lost
  jobs, reaping dead workers, pruning old jobs, the throughput rollup) and the service that runs
  them.
- ``scheduler``: enqueues due ticks of periodic schedules.
- ``wakeup``: LISTEN/NOTIFY (where to LISTEN: ``db/listening.py``) and in-process wake-ups,
  with polling underneath.
- ``supervisor``: several worker processes, restarted when they crash or recycle.
- ``resilience``: riding out database restarts and dropped connections.
"""
