"""A call on a thread of its own, for tests that need two connections at once: the thread gets
connections of its own (Django's are per thread), closed when it ends."""

import threading

from django.db import connections


def start_thread(call, errors: list) -> threading.Thread:
    """Start ``call()`` on a new thread and return it; what ``call`` raises is appended to
    ``errors`` for the test to report."""

    def run():
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread
