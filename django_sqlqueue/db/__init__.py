"""Below the ORM: one driver per database, and how statements reach it.

``ops(connection)`` is the driver of a connection's database (``base.py`` says what a driver
answers; the packages ``postgresql/``, ``sqlite/`` and ``mariadb/`` are the three, each a
``driver.py`` and a ``statements.py``), made once per connection and kept on it, as Django keeps
``connection.ops``. ``returning.py`` runs a statement
that changes rows and returns columns on any database, ``batches.py`` gives each batch of a big
change its own short transaction, and ``instances.py`` turns fetched rows into model instances
cheaply, ``outages.py`` tells a database gone from a job's failure, and ``clock.py`` reads the
database's clock.
"""

from django.core.signals import setting_changed
from django.db import connections
from django.dispatch import receiver

from .base import DatabaseDriver, UnsupportedDriver
from .mariadb.driver import MariaDBDriver
from .postgresql.driver import PostgreSQLDriver
from .sqlite.driver import SQLiteDriver

#: The driver of each of Django's database vendors (MariaDB is ``"mysql"``).
DRIVERS = {"postgresql": PostgreSQLDriver, "sqlite": SQLiteDriver, "mysql": MariaDBDriver}


def ops(connection) -> DatabaseDriver:
    """The driver of ``connection``'s database (a Django connection, or its proxy)."""
    try:
        return connection.sqlqueue_ops
    except AttributeError:
        driver = DRIVERS.get(connection.vendor, UnsupportedDriver)(connection)
        connection.sqlqueue_ops = driver
        return driver


@receiver(setting_changed)
def _forget_drivers(*, setting, **kwargs):
    """A driver's SQL text depends on USE_TZ (SQLite's clock) and on the databases: made
    again after they change (tests change them)."""
    if setting in ("USE_TZ", "DATABASES"):
        for connection in connections.all(initialized_only=True):
            connection.__dict__.pop("sqlqueue_ops", None)
