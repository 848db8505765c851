"""A throwaway PgBouncer in transaction pooling mode in front of the suite's PostgreSQL cluster
(tests/postgres_cluster.py), for the ``SQLQUEUE_TEST_DATABASE=pgbouncer`` pass: the usual
production pooler, with the settings docs/scaling.md documents. ``restart()`` is for chaos tests.

Debian's ``pgbouncer`` package (scripts/test.sh installs it when missing). Like PostgreSQL, it
refuses to run as root: it runs as the cluster's user.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

from tests.postgres_cluster import _free_port

INSTALL_HINT = ("PgBouncer was not found. Install it (Debian/Ubuntu: `apt-get install -y "
                "pgbouncer`) or put it on PATH.")

CONFIG = """\
[databases]
* = host=127.0.0.1 port={server_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {base}/userlist.txt
admin_users = postgres
pool_mode = transaction
; The suite's worker fleets open many client connections; PgBouncer shares the server ones.
max_client_conn = 2000
default_pool_size = 40
max_db_connections = 150
; After a failed server login (PostgreSQL restarting), PgBouncer refuses every new login for
; server_login_retry: 15 s by default, longer than the restart itself.
server_login_retry = 1
logfile = {base}/pgbouncer.log
pidfile = {base}/pgbouncer.pid
"""


def find_pgbouncer() -> str:
    for candidate in (shutil.which("pgbouncer"), "/usr/sbin/pgbouncer"):
        if candidate and os.path.exists(candidate):
            return candidate
    raise RuntimeError(INSTALL_HINT)


class PgBouncer:
    def __init__(self, cluster):
        self.executable = find_pgbouncer()
        self.cluster = cluster
        self.port = _free_port()
        self.base = cluster.base / "pgbouncer"
        self.base.mkdir()
        (self.base / "pgbouncer.ini").write_text(
            CONFIG.format(server_port=cluster.port, port=self.port, base=self.base)
        )
        (self.base / "userlist.txt").write_text('"postgres" ""\n')
        if cluster.run_as is not None:
            for path in (self.base, *self.base.iterdir()):
                os.chown(path, cluster.run_as.pw_uid, cluster.run_as.pw_gid)
        self.process = None

    def start(self):
        kwargs = {}
        if self.cluster.run_as is not None:
            kwargs = {"user": self.cluster.run_as.pw_uid, "group": self.cluster.run_as.pw_gid}
        self.process = subprocess.Popen(
            [self.executable, str(self.base / "pgbouncer.ini")], cwd=self.base,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            **kwargs,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited ({self.process.returncode}):\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"pgbouncer did not listen on {self.port}:\n{self.log()}")

    def stop(self):
        """SIGTERM: PgBouncer drops every client and server connection at once, as a crash or
        a restart by a service manager would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)
        self.process = None

    def restart(self):
        self.stop()
        self.start()

    def wait_serving(self, dbname, timeout=60):
        """Until a query on ``dbname`` goes through: after PostgreSQL restarts, PgBouncer's first
        server login to it may fail, and it refuses logins to that database for
        server_login_retry after that."""
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                                     dbname=dbname, connect_timeout=5) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.Error:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def log(self) -> str:
        path = self.base / "pgbouncer.log"
        return path.read_text()[-3000:] if path.exists() else ""
