"""A throwaway database of any of the three vendors for the single-system benchmark scripts
(fair_claim_cost.py, fairness_pickup.py): PostgreSQL (``pg.py``, fsync on), MariaDB
(``mariadb.py``, its default durability) or a SQLite file in a temporary directory (WAL, as the
test suite and docs/databases.md set it up), migrated, with Django set up in this process on it.

    with bench_database("sqlite", "benchmarks.prune_settings") as database:
        database.env      # the environment of worker subprocesses (runworker) on the same database
        database.vendor   # Django's name: postgresql, sqlite, mysql
"""

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATABASES = ("postgresql", "sqlite", "mariadb")


def argument_parser(doc: str) -> argparse.ArgumentParser:
    """A script's parser, its docstring as help, with ``--database`` (default PostgreSQL)."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=DATABASES, default="postgresql")
    return parser


@dataclass
class BenchDatabase:
    name: str  # postgresql, sqlite or mariadb
    dsn: str
    env: dict
    server: object = None  # BenchCluster or BenchMariaDB; None for SQLite

    def server_pid(self) -> int | None:
        """The server's main process (its workers are its children); None for SQLite."""
        if self.server is None:
            return None
        path = (self.server.datadir / "postmaster.pid" if self.name == "postgresql"
                else self.server.base / "mariadbd.pid")
        return int(path.read_text().split()[0])

    @property
    def vendor(self) -> str:
        from django.db import connection

        return connection.vendor

    def settings(self) -> dict:
        """The server's settings worth recording with the numbers."""
        if self.server is not None:
            return self.server.settings()
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT sqlite_version()")
            (version,) = cursor.fetchone()
        return {"sqlite_version": version, "journal_mode": "wal", "synchronous": "full"}


@contextlib.contextmanager
def bench_database(name: str, settings_module: str, dbname: str = "bench"):
    """Start (or make) the database, migrate it, set Django up on it; stop it on the way out."""
    if name not in DATABASES:
        raise ValueError(f"{name!r}: choose one of {', '.join(DATABASES)}")
    scratch = Path(tempfile.mkdtemp(prefix="sqlqueue-bench-"))
    server = None
    try:
        if name == "postgresql":
            from benchmarks.pg import BenchCluster

            server = BenchCluster()
            server.start()
            server.wait_ready()
            dsn = server.create_database(dbname)
        elif name == "mariadb":
            from benchmarks.mariadb import BenchMariaDB

            server = BenchMariaDB()
            server.start()
            dsn = server.create_database(dbname)
        else:
            dsn = f"sqlite:///{scratch / (dbname + '.sqlite3')}"
        env = {**os.environ, "BENCH_SYSTEM": "sqlqueue", "BENCH_DSN": dsn,
               "DJANGO_SETTINGS_MODULE": settings_module, "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-m", "django", "migrate"], env=env, cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL)
        os.environ.update({k: env[k] for k in ("BENCH_SYSTEM", "BENCH_DSN",
                                               "DJANGO_SETTINGS_MODULE")})
        import django

        django.setup()
        yield BenchDatabase(name, dsn, env, server)
    finally:
        from django.db import connections

        connections.close_all()
        if server is not None:
            server.stop()
            with contextlib.suppress(Exception):
                server.destroy()
        shutil.rmtree(scratch, ignore_errors=True)
