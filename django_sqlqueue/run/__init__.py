"""Running a claimed job: ``cancellation.py`` (stopping an attempt whose job was cancelled) and
``retry.py`` (when a failed job runs again). The runner itself (``runner.py``), what each outcome
writes (``outcomes.py``) and ``run_job`` (``execution.py``) are still at the package's top."""
