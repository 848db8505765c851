"""SQLite 3.35+: one writer at a time, under its write lock; new jobs through bulk_create."""

import sqlite3

from .base import DatabaseDriver


class SQLiteDriver(DatabaseDriver):
    vendor = "sqlite"

    def problem(self) -> str | None:
        if sqlite3.sqlite_version_info >= (3, 35):
            return None
        return f"SQLite {sqlite3.sqlite_version} lacks UPDATE ... RETURNING (3.35+)"
