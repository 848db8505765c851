"""The jobs of the async-sleep benchmark (``benchmarks/async_sleep.py``): each job waits 100 ms,
written in each system's own way. Installed by ``benchmarks/async_settings.py`` only."""
