"""A worker inside the web server's processes, for deployments of one container (docs/operations.md,
"A worker in the web process"). Off unless ``SQLQUEUE["EMBEDDED_WORKER"]`` is on; the server's
own life cycle starts and stops it:

- ``gunicorn``: the ``post_worker_init`` and ``worker_exit`` hooks for ``gunicorn.conf.py``.
- ``asgi``: ``with_embedded_worker(application)``, which answers the ASGI lifespan (uvicorn,
  hypercorn, gunicorn's uvicorn worker).
- ``runserver``: started by the app in ``runserver``'s serving process, never in its reloader.
- ``thread``: the one ``WorkerProcess`` of this process, run on a thread (``start``, ``stop``).
- ``options``: the setting, read into a ``WorkerConfig``.

This package imports nothing of Django's at import time, so that ``gunicorn.conf.py`` may import
its hooks before Django is set up.
"""
