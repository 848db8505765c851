"""A real web server (gunicorn, uvicorn or runserver) as a subprocess, serving the test site
(tests/web_settings.py) with the embedded worker, for tests/process/test_embedded_worker.py."""

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request

from tests.process.conftest import ROOT, WorkerProcess

#: Each server's command line, serving on ``{port}``.
COMMANDS = {
    "gunicorn-sync": ["-m", "gunicorn", "-c", "tests/support/gunicorn_conf.py", "-w", "2",
                      "-k", "sync", "-b", "127.0.0.1:{port}", "tests.support.web_apps:wsgi"],
    "gunicorn-gthread": ["-m", "gunicorn", "-c", "tests/support/gunicorn_conf.py", "-w", "2",
                         "-k", "gthread", "--threads", "4", "-b", "127.0.0.1:{port}",
                         "tests.support.web_apps:wsgi"],
    # Each web process replaced after 10 requests (gunicorn's max_requests), its worker with it.
    "gunicorn-recycling": ["-m", "gunicorn", "-c", "tests/support/gunicorn_conf.py", "-w", "2",
                           "--max-requests", "10", "-b", "127.0.0.1:{port}",
                           "tests.support.web_apps:wsgi"],
    "uvicorn": ["-m", "uvicorn", "--workers", "2", "--host", "127.0.0.1", "--port", "{port}",
                "tests.support.web_apps:asgi"],
    "runserver": ["-m", "django", "runserver", "127.0.0.1:{port}"],
    "runserver-noreload": ["-m", "django", "runserver", "--noreload", "127.0.0.1:{port}"],
}
#: How many worker processes (each with an embedded worker) each one serves from.
PROCESSES = {"gunicorn-sync": 2, "gunicorn-gthread": 2, "gunicorn-recycling": 2, "uvicorn": 2,
             "runserver": 1, "runserver-noreload": 1}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class WebServer(WorkerProcess):
    """A server subprocess; ``output``, ``wait()`` and ``stop()`` (a SIGKILL to its process
    group, for the teardown) as a worker's."""

    def __init__(self, kind, env, log_path):
        self.kind = kind
        self.port = free_port()
        self.log_path = log_path
        self.log = open(log_path, "w")  # a file, not a pipe: a full pipe would block it
        argv = [part.format(port=self.port) for part in COMMANDS[kind]]
        self.proc = subprocess.Popen(
            [sys.executable, *argv], cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.web_settings",
                 "PYTHONUNBUFFERED": "1", **env},
            start_new_session=True,  # its own process group: as a terminal's Ctrl-C reaches it
        )
        self.pid = self.proc.pid

    def get(self, path, timeout=10):
        """(status, JSON body) of GET ``path``."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/{path}",
                                        timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def shut_down(self):
        """As the server's operator does: SIGTERM, except runserver's Ctrl-C (SIGINT to its
        process group, its reloader and its serving child alike)."""
        if self.kind.startswith("runserver"):
            os.killpg(self.proc.pid, signal.SIGINT)
        else:
            self.proc.send_signal(signal.SIGTERM)
