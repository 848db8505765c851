"""SQLite's deferred transactions (Django's default) under another writer: a transaction that
reads, then writes, fails at once with "database is locked" when another connection holds the
write lock, instead of waiting for it. Code that reads before it writes takes the write lock
first (db/batches.py ``write_lock_first``); this runs a call while another connection holds it."""

import sqlite3

from django.db import connection

from tests.support.threads import start_thread


def errors_behind_another_writer(call) -> list:
    """Run ``call()`` in a thread while another connection holds the write lock of the test
    database (as another process in the middle of a write would), then let that writer commit;
    return what ``call`` raised (empty: it waited its turn)."""
    writer = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    errors = []
    caller = start_thread(call, errors)
    caller.join(0.5)  # a call that cannot wait has failed by now
    writer.execute("COMMIT")
    writer.close()
    caller.join(30)
    return errors
