"""The throwaway PostgreSQL server of a benchmark run: the test suite's cluster helper
(tests/postgres_cluster.py: initdb into a temp dir, a free port, the ``postgres`` user when we are
root), started with PostgreSQL's default durability settings instead of the test suite's fsync=off.
"""

import os
import subprocess
import sys
from pathlib import Path

from tests.postgres_cluster import Cluster

ROOT = Path(__file__).resolve().parents[1]

#: Only what a benchmark needs beyond the defaults: room for every worker's connections and a
#: socket on loopback. fsync, synchronous_commit, full_page_writes and wal_sync_method stay at
#: PostgreSQL's defaults (on, on, on, fdatasync), as in production.
SERVER_OPTIONS = [
    "-c listen_addresses=127.0.0.1",
    "-c max_connections=200",
]


class BenchCluster(Cluster):
    def start(self):
        if not self.datadir.exists():
            self._run(
                "initdb", "-D", str(self.datadir), "-U", self.superuser, "--auth=trust",
                "-E", "UTF8", "--no-instructions",
            )
        options = " ".join([f"-p {self.port}", f"-k {self.base}", *SERVER_OPTIONS])
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.datadir),
                  "-l", str(self.logfile), "-o", options)
        return self

    def dsn(self, dbname: str) -> str:
        return f"postgresql://{self.superuser}@127.0.0.1:{self.port}/{dbname}"

    def psql(self, dbname: str, sql: str) -> str:
        result = subprocess.run(
            [str(self.bindir / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
             "-h", "127.0.0.1", "-p", str(self.port), "-U", self.superuser, "-d", dbname,
             "-c", sql],
            capture_output=True, text=True, check=True,
        )
        return result.stdout.strip()

    def create_database(self, dbname: str) -> str:
        self.psql("postgres", f'DROP DATABASE IF EXISTS "{dbname}"')
        self.psql("postgres", f'CREATE DATABASE "{dbname}"')
        return self.dsn(dbname)

    def settings(self) -> dict:
        names = ["server_version", "fsync", "synchronous_commit", "full_page_writes",
                 "wal_sync_method", "shared_buffers", "max_wal_size", "checkpoint_timeout",
                 "max_connections"]
        wanted = ", ".join(f"'{n}'" for n in names)
        rows = self.psql("postgres", f"SELECT name, setting FROM pg_settings WHERE name IN ({wanted})")  # noqa: S608, E501
        return dict(line.split("|", 1) for line in rows.splitlines())


def django_on_fresh_database(cluster: "BenchCluster", dbname: str, settings_module: str) -> dict:
    """Create ``dbname`` on ``cluster``, migrate it, and set Django up on it in this process;
    returns the environment for the subprocesses (workers) that use it too."""
    env = {**os.environ, "BENCH_SYSTEM": "sqlqueue", "BENCH_DSN": cluster.create_database(dbname),
           "DJANGO_SETTINGS_MODULE": settings_module, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "django", "migrate", "--run-syncdb"], env=env,
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    os.environ.update({k: env[k] for k in ("BENCH_SYSTEM", "BENCH_DSN", "DJANGO_SETTINGS_MODULE")})
    import django

    django.setup()
    return env
