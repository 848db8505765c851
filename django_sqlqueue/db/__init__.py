"""Below the ORM: how statements reach each database.

``returning.py`` runs a statement that changes rows and returns columns on any database,
``batches.py`` gives each batch of a big change its own short transaction, and ``instances.py``
turns fetched rows into model instances cheaply.
"""
