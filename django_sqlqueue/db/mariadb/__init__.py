"""MariaDB: ``driver.py`` (``MariaDBDriver``, what ``db.ops`` answers on it, and its key scan)
and ``statements.py`` (its own SQL text: the stepped updates, the inserts, its migrations'
generated columns)."""
