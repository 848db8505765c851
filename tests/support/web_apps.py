"""The WSGI and ASGI applications of the test web servers (tests/web_settings.py):
``tests.support.web_apps:wsgi`` for gunicorn, ``tests.support.web_apps:asgi`` for uvicorn, with
the embedded worker on the ASGI lifespan as docs/operations.md shows."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.web_settings")

from django.core.asgi import get_asgi_application  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

from django_sqlqueue.embedded.asgi import with_embedded_worker  # noqa: E402

wsgi = get_wsgi_application()
asgi = with_embedded_worker(get_asgi_application())
