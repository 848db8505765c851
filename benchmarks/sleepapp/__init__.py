"""The jobs of the benchmarks whose jobs wait 100 ms (``async_sleep.py``, ``autoscale_bursty.py``),
written in each system's own way. Installed by ``benchmarks/sleep_settings.py`` only."""
