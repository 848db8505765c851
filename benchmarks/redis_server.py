"""The throwaway Redis server of a benchmark run, for the Redis-backed peers (Celery, RQ).

Debian's ``redis-server`` binary on a free port of 127.0.0.1, with its own temporary directory;
every other setting is Redis's built-in default (no config file), which is what ``redis-server``
runs with out of the box: RDB snapshots in the background, no append-only file.
"""

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    def __init__(self):
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is missing: apt-get install redis-server "
                               "(benchmarks/run.sh does it when run as root)")
        self.binary = binary
        self.base = Path(tempfile.mkdtemp(prefix="bench-redis-"))
        self.port = free_port()
        self.proc = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.base), "--logfile", str(self.base / "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.ping():
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited; see {self.base / 'redis.log'}")
            time.sleep(0.1)
        raise RuntimeError("redis-server did not answer PING within 20 s")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def version(self) -> str:
        out = subprocess.run([self.binary, "--version"], capture_output=True, text=True).stdout
        return out.split()[2].removeprefix("v=") if out else "?"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.base, ignore_errors=True)
