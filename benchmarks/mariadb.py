"""The throwaway MariaDB server of a benchmark run: the test suite's server helper
(tests/mariadb_server.py: ``mariadb-install-db`` into a temp dir, a free port on 127.0.0.1, the
``mysql`` user when we are root), started with MariaDB's default durability instead of the test
suite's (which turns the flush at commit and the doublewrite buffer off).
"""

import subprocess

from tests.mariadb_server import PASSWORD, USER, MariaDBServer

#: Only what a benchmark needs beyond the defaults: its own files (temporary files too: in /tmp,
#: MariaDB's default, another program's clean-up of /tmp once failed an UPDATE with "Error on
#: delete of '/tmp/#sql-update-...'") and port, room for every
#: worker's connections, UTC and utf8mb4 as Django's MariaDB backend expects. The InnoDB log is
#: flushed at every commit, with the doublewrite buffer on, as MariaDB ships it (and the binary
#: log off, also its default).
SERVER_OPTIONS = [
    "--bind-address=127.0.0.1", "--skip-name-resolve", "--max-connections=500",
    "--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci",
    "--default-time-zone=+00:00",
]

#: Server variables recorded with the results.
SETTINGS = ["version", "innodb_flush_log_at_trx_commit", "innodb_doublewrite",
            "innodb_flush_method", "innodb_buffer_pool_size", "log_bin", "max_connections",
            "tx_isolation"]


class BenchMariaDB(MariaDBServer):
    def _launch(self):
        # --no-defaults: none of the machine's my.cnf (a system server's port, socket, datadir).
        self.process = subprocess.Popen(
            [self.server, "--no-defaults", f"--datadir={self.datadir}", f"--port={self.port}",
             f"--socket={self.socket}", f"--pid-file={self.base / 'mariadbd.pid'}",
             f"--log-error={self.logfile}", f"--tmpdir={self.base}", *SERVER_OPTIONS,
             *self._user_option()],
            cwd=self.base, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.wait_ready()

    def query(self, statement: str) -> list:
        """Rows of one statement, as the server's root over its socket, tab-separated."""
        result = subprocess.run(
            ["mariadb", "--no-defaults", "-uroot", f"--socket={self.socket}", "-N", "-B",
             "-e", statement],
            capture_output=True, text=True, check=True,
        )
        return [line.split("\t") for line in result.stdout.splitlines()]

    def dsn(self, dbname: str) -> str:
        return f"mysql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, dbname: str) -> str:
        self.query(f"DROP DATABASE IF EXISTS `{dbname}`; CREATE DATABASE `{dbname}` "
                   "CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        return self.dsn(dbname)

    def settings(self) -> dict:
        (values,) = self.query("SELECT " + ", ".join(f"@@{name}" for name in SETTINGS))
        return dict(zip(SETTINGS, values, strict=True))
