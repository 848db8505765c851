"""SQLite: ``driver.py`` (``SQLiteDriver``, what ``db.ops`` answers on it) and ``statements.py``
(its own SQL text: its clock, the write lock, the tag look-up)."""
