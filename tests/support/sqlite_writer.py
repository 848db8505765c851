"""SQLite's deferred transactions (Django's default) under another writer: a transaction that
reads, then writes, fails at once with "database is locked" when another connection holds the
write lock, instead of waiting for it. Code that reads before it writes takes the write lock
first (db/batches.py ``write_lock_first``); this runs a call while another connection holds it."""

import sqlite3
import threading

from django.db import connection, connections


def errors_behind_another_writer(call) -> list:
    """Run ``call()`` in a thread while another connection holds the write lock of the test
    database (as another process in the middle of a write would), then let that writer commit;
    return what ``call`` raised (empty: it waited its turn)."""
    writer = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    errors = []

    def run():
        try:
            call()
        except Exception as error:  # noqa: BLE001 - the test reports it
            errors.append(error)
        finally:
            connections.close_all()

    caller = threading.Thread(target=run)
    caller.start()
    caller.join(0.5)  # a call that cannot wait has failed by now
    writer.execute("COMMIT")
    writer.close()
    caller.join(30)
    return errors
