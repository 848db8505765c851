"""Running a claimed job and recording what came of it: ``runner.py`` (call the job's function,
classify the outcome, for every API), ``outcomes.py`` (what each outcome writes, in one fenced
write), ``execution.py`` (``run_job`` by hand, and the ``job finished`` line), ``cancellation.py``
(stopping an attempt whose job was cancelled) and ``retry.py`` (when a failed job runs again)."""
