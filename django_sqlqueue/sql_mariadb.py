"""Moved to :mod:`django_sqlqueue.db.mariadb_statements`; this path stays for migration 0012, which
imports it (migrations never change). The old name is the new module itself, not a copy of its
names: a monkeypatch or ``mock.patch`` through either path changes the same object."""

import sys

from .db import mariadb_statements as _module

sys.modules[__name__] = _module
