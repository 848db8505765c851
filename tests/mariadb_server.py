"""A throwaway MariaDB server for the test suite (``SQLQUEUE_TEST_DATABASE=mariadb``):
``mariadb-install-db`` into a temp dir, ``mariadbd`` on a free port and its own socket, stopped and
deleted at the end. ``restart()`` and ``kill_connections()`` are for chaos tests.

Debian's ``mariadb-server`` package (scripts/test.sh installs it when missing, as root). Like
PostgreSQL, MariaDB refuses to run as root: as root, the server runs as the ``mysql`` user that the
package creates. No fsync at commit and no doublewrite: an OS crash is not under test, and the suite
runs four times faster without the fsyncs. A crash of the server is (``restart(mode="immediate")``
kills it), so each commit's log is still written to the OS at commit
(``innodb_flush_log_at_trx_commit=2``; with 0 a killed server lost the commits of its last
second, and the chaos ledger counted jobs whose run had been acknowledged as lost).
"""

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.postgres_cluster import _free_port, _user_exists

INSTALL_HINT = (
    "The MariaDB server (mariadbd, mariadb-install-db) was not found. Install it "
    "(Debian/Ubuntu: `apt-get install -y mariadb-server`) or put it on PATH."
)

#: The account the suite connects with (over TCP, a password: the server's root account
#: authenticates over the socket only).
USER, PASSWORD = "sqlqueue", "sqlqueue"


def find_programs() -> tuple[str, str]:
    server = shutil.which("mariadbd") or ("/usr/sbin/mariadbd"
                                           if os.path.exists("/usr/sbin/mariadbd") else None)
    install_db = shutil.which("mariadb-install-db")
    if not server or not install_db:
        raise RuntimeError(INSTALL_HINT)
    return server, install_db


class MariaDBServer:
    """One MariaDB server owned by the test run."""

    def __init__(self):
        self.server, self.install_db = find_programs()
        self.port = _free_port()
        self.base = Path(tempfile.mkdtemp(prefix="sqlqueue-mariadb-"))
        self.datadir = self.base / "data"
        self.socket = self.base / "mariadb.sock"
        self.logfile = self.base / "server.log"
        self.process = None
        self.run_as = None
        if os.geteuid() == 0:
            name = "mysql" if _user_exists("mysql") else "nobody"
            self.run_as = pwd.getpwnam(name)
            os.chown(self.base, self.run_as.pw_uid, self.run_as.pw_gid)
        os.chmod(self.base, 0o700)

    def _user_option(self) -> list:
        return [f"--user={self.run_as.pw_name}"] if self.run_as is not None else []

    def start(self):
        if not self.datadir.exists():
            with tempfile.TemporaryFile(mode="w+") as output:
                result = subprocess.run(
                    [self.install_db, "--no-defaults", f"--datadir={self.datadir}",
                     "--auth-root-authentication-method=socket", "--skip-test-db",
                     *self._user_option()],
                    cwd=self.base, stdin=subprocess.DEVNULL, stdout=output,
                    stderr=subprocess.STDOUT,
                )
                output.seek(0)
                if result.returncode != 0:
                    raise RuntimeError(f"mariadb-install-db failed:\n{output.read()[-3000:]}")
            self._launch()
            self._sql(
                f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'; "
                f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'%' WITH GRANT OPTION;"
            )
        else:
            self._launch()
        return self

    def _launch(self):
        # --no-defaults: none of the machine's my.cnf (a system server's port, socket, datadir).
        self.process = subprocess.Popen(
            [self.server, "--no-defaults", f"--datadir={self.datadir}", f"--port={self.port}",
             f"--socket={self.socket}", "--bind-address=127.0.0.1", "--skip-name-resolve",
             f"--pid-file={self.base / 'mariadbd.pid'}", f"--log-error={self.logfile}",
             "--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci",
             "--default-time-zone=+00:00", "--max-connections=500", "--skip-log-bin",
             "--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M",
             "--innodb-flush-log-at-trx-commit=2", "--innodb-doublewrite=0",
             "--innodb-flush-method=nosync", *self._user_option()],
            cwd=self.base, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.wait_ready()

    def _sql(self, statements: str):
        result = subprocess.run(
            ["mariadb", "--no-defaults", "-uroot", f"--socket={self.socket}", "-e", statements],
            capture_output=True, text=True, check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"mariadb -e {statements!r} failed: {result.stderr}")
        return result.stdout

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mariadbd exited ({self.process.returncode}):\n{self.log()}")
            ping = subprocess.run(
                ["mariadb-admin", "--no-defaults", "-uroot", f"--socket={self.socket}", "ping"],
                capture_output=True, check=False,
            )
            if ping.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f"MariaDB on port {self.port} did not become ready:\n{self.log()}")

    def log(self) -> str:
        return self.logfile.read_text()[-3000:] if self.logfile.exists() else ""

    def stop(self, *, kill=False):
        """Shut the server down (``kill``: SIGKILL, as a crash, then InnoDB recovers at start)."""
        if self.process is None or self.process.poll() is not None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()  # SIGTERM: a clean shutdown
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def restart(self, mode="fast"):
        """Stop and start again on the same port; ``mode="immediate"`` kills it (as pg_ctl's)."""
        self.stop(kill=mode == "immediate")
        self._launch()

    def create_databases(self, *names):
        """CREATE DATABASE each of ``names`` unless it exists."""
        self._sql(" ".join(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4;"
                           for name in names))

    def kill_connections(self, user=USER) -> int:
        """KILL every connection of ``user`` (as an operator or a failover would); how many."""
        ids = self._sql(
            f"SELECT id FROM information_schema.processlist WHERE user = '{user}'"  # noqa: S608 - our constant
        ).split()[1:]
        for connection_id in ids:
            self._sql(f"KILL CONNECTION {int(connection_id)}")
        return len(ids)

    def destroy(self):
        self.stop(kill=True)
        shutil.rmtree(self.base, ignore_errors=True)

