"""A throwaway PostgreSQL cluster for the test suite: initdb into a temp dir, start on a free
port, stop and delete at the end.

Why not pytest-postgresql: it runs initdb and pg_ctl as the current user, and PostgreSQL refuses to
start as root, which is how CI runs (pytest-postgresql issues #341 and #455, closed without an
option for another user). Here, when we are root, the server runs as the unprivileged ``postgres``
user (created by Debian's postgresql package) or ``nobody``.
"""

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

INSTALL_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl) were not found. Install them "
    "(Debian/Ubuntu: `apt-get install -y postgresql`), put their directory on PATH or in "
    "SQLQUEUE_PG_BINDIR, or point DATABASE_URL at a server you already run."
)


def find_bindir() -> Path:
    candidates = []
    if os.environ.get("SQLQUEUE_PG_BINDIR"):
        candidates.append(Path(os.environ["SQLQUEUE_PG_BINDIR"]))
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent)
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += sorted(
        (Path(p) for p in versions), key=lambda p: int(p.parent.name.split(".")[0]), reverse=True
    )
    for bindir in candidates:
        if (bindir / "initdb").exists() and (bindir / "pg_ctl").exists():
            return bindir
    raise RuntimeError(INSTALL_HINT)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """One PostgreSQL server owned by the test run. ``restart()`` is for chaos tests."""

    superuser = "postgres"

    def __init__(self, *, durable=False, options=None):
        self.durable = durable  # fsync on, as in production (benchmarks); off for tests
        self.options = dict(options or {})  # more server settings; these win over the above
        self.bindir = find_bindir()
        self.port = _free_port()
        self.base = Path(tempfile.mkdtemp(prefix="sqlqueue-pg-"))
        self.datadir = self.base / "data"
        self.logfile = self.base / "server.log"
        self.run_as = None
        if os.geteuid() == 0:
            name = "postgres" if _user_exists("postgres") else "nobody"
            self.run_as = pwd.getpwnam(name)
            os.chown(self.base, self.run_as.pw_uid, self.run_as.pw_gid)
        os.chmod(self.base, 0o700)

    def _run(self, *args, check=True):
        kwargs = {}
        if self.run_as is not None:
            kwargs = {"user": self.run_as.pw_uid, "group": self.run_as.pw_gid}
        # Output goes to a file, not a pipe: the server that pg_ctl starts inherits the
        # descriptors, and reading a pipe it holds open would never end.
        with tempfile.TemporaryFile(mode="w+") as output:
            result = subprocess.run(
                [str(self.bindir / args[0]), *args[1:]],
                cwd=self.base, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                **kwargs,
            )
            output.seek(0)
            text = output.read()
        if check and result.returncode != 0:
            log = self.logfile.read_text()[-3000:] if self.logfile.exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}):\n{text}{log}")
        return result

    def start(self):
        if not self.datadir.exists():
            self._run(
                "initdb", "-D", str(self.datadir), "-U", self.superuser, "--auth=trust",
                "-E", "UTF8", "--no-sync", "--no-instructions",
            )
        options = " ".join(
            [
                f"-p {self.port}",
                f"-k {self.base}",
                "-c listen_addresses=127.0.0.1",
                "-c max_connections=200",
            ]
            # Tests want speed; durability across an OS crash is not under test there.
            + ([] if self.durable else
               ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"])
            + [f"-c {name}='{value}'" for name, value in self.options.items()]  # pg_ctl's shell
        )
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.datadir),
                  "-l", str(self.logfile), "-o", options)
        return self

    def stop(self, mode="fast"):
        self._run("pg_ctl", "stop", "-w", "-D", str(self.datadir), "-m", mode, check=False)

    def restart(self, mode="fast"):
        self._run("pg_ctl", "restart", "-w", "-D", str(self.datadir), "-m", mode)

    def destroy(self):
        self.stop(mode="immediate")
        shutil.rmtree(self.base, ignore_errors=True)

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = self._run("pg_isready", "-h", "127.0.0.1", "-p", str(self.port), check=False)
            if ready.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f"PostgreSQL on port {self.port} did not become ready")


def _user_exists(name) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
