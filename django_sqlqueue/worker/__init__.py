"""The worker: one duty per module.

- ``config``: the options of one worker, validated.
- ``process``: one worker process: claims jobs into free slots and shuts down gracefully.
- ``pool``: the threads that run jobs, and which jobs they hold.
- ``heartbeat``: renews leases, updates the worker's row, fails jobs past their timeout.
- ``maintenance``: expires, rescues lost jobs, reaps dead workers, prunes old jobs.
- ``wakeup``: LISTEN/NOTIFY and in-process wake-ups, with polling underneath.
- ``supervisor``: several worker processes, restarted when they crash or recycle.
- ``resilience``: riding out database restarts and dropped connections.
"""
