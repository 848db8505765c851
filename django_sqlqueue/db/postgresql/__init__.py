"""PostgreSQL: ``driver.py`` (``PostgreSQLDriver``, what ``db.ops`` answers on it) and
``statements.py`` (its own SQL text: catalog reads, NOTIFY and LISTEN, its migrations' schema)."""
