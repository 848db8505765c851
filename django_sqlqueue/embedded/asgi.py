"""The embedded worker started and stopped by the ASGI lifespan protocol::

    # asgi.py
    from django.core.asgi import get_asgi_application
    from django_sqlqueue.embedded.asgi import with_embedded_worker

    application = with_embedded_worker(get_asgi_application())

Django's application answers HTTP only; this wrapper answers the ``lifespan`` scope that
uvicorn, hypercorn and gunicorn's uvicorn worker send to each of their worker processes: the
worker starts at ``lifespan.startup`` and stops, gracefully, at ``lifespan.shutdown``, which the
server sends once its requests are done. Everything else goes to ``application``. While
``SQLQUEUE["EMBEDDED_WORKER"]`` is off, the lifespan is answered and nothing starts.
"""

import asyncio


def with_embedded_worker(application):
    """``application`` (an ASGI application) with the embedded worker on its lifespan."""

    async def app(scope, receive, send):
        if scope["type"] != "lifespan":
            return await application(scope, receive, send)
        from . import thread

        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    # In a thread: it reads settings and builds the worker, which the
                    # event loop must not wait on.
                    await asyncio.to_thread(thread.start)
                except Exception as exc:  # noqa: BLE001 - the server reports it and exits
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return None
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await asyncio.to_thread(thread.stop)
                await send({"type": "lifespan.shutdown.complete"})
                return None

    return app
