"""``runworker --metrics-port``: serve the worker's Prometheus metrics over HTTP.

One process (no ``--processes``) serves its own metrics from a thread of its own, as
``prometheus_client.start_http_server`` does.

With ``--processes``, the supervisor serves the figures of all its children through
prometheus_client's multiprocess mode: each child writes its metrics to memory-mapped files in
one directory (``PROMETHEUS_MULTIPROC_DIR``), and the supervisor sums them at each scrape. Chosen
over the supervisor asking each child for its figures because the children then need no server,
no port and no protocol of their own, a scrape works while a child is restarting, and the counters
of a child that exited (a recycle, a crash) stay in the sums, so they never go down. A gauge of a
live process ("livesum") is dropped when the supervisor sees that process exit.

The supervisor serves from its main thread, between its checks on the children, not from a
thread: a forked child must not inherit a thread (children.fork_blocker).
"""

import os
import shutil
import tempfile
import threading
import time
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from ..telemetry import metrics

ENV = "PROMETHEUS_MULTIPROC_DIR"


class MetricsExport:
    """The endpoint of one ``runworker`` command: :meth:`start` it, then ``serve(seconds)``
    in the supervisor's loop (with ``--processes``), ``child_exited(pid)`` for each child that
    exits, and :meth:`close` at the end."""

    def __init__(self, *, port: int, address: str, processes: int):
        metrics.require("--metrics-port")
        self.port = port
        self.address = address
        self.multiprocess = processes > 1
        self.directory = None
        self._own_directory = False
        self._server = None
        self._thread = None

    def start(self) -> str:
        """Bind the port (OSError if taken) and say where the metrics are served."""
        if self.multiprocess:
            self._enable_multiprocess_mode()
        from prometheus_client import make_wsgi_app

        self._server = make_server(self.address, self.port, make_wsgi_app(self._registry()),
                                   WSGIServer, handler_class=_QuietHandler)
        self.port = self._server.server_port  # the one picked, for --metrics-port 0
        if self.multiprocess:
            where = f"summed over the worker processes from {self.directory}"
        else:
            where = "of this process"
            self._thread = threading.Thread(target=self._server.serve_forever,
                                            name="sqlqueue-metrics", daemon=True)
            self._thread.start()
        return (f"metrics: http://{self.address or '0.0.0.0'}:{self.port}/metrics "
                f"(Prometheus, {where})")

    def serve(self, seconds: float) -> None:
        """Answer scrapes for ``seconds`` (the supervisor's pause between checks)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self._server.timeout = left
            self._server.handle_request()

    def child_exited(self, pid: int) -> None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, self.directory)

    def close(self) -> None:
        if self._server is not None:
            if self._thread is not None:
                self._server.shutdown()
            self._server.server_close()
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _enable_multiprocess_mode(self):
        """Give the children a directory for their figures, through the environment that
        forked and spawned children alike inherit: the one in PROMETHEUS_MULTIPROC_DIR if set
        (the operator's, e.g. shared with gunicorn; left in place), else a new one of ours."""
        self.directory = os.environ.get(ENV)
        if not self.directory:
            self.directory = tempfile.mkdtemp(prefix="sqlqueue-metrics-")
            self._own_directory = True
            os.environ[ENV] = self.directory
        from prometheus_client import values

        # prometheus_client picks its storage when first imported; if a project's app imported
        # it before this command ran, metrics made from now on (ours are made at their first
        # event, in the children) must still go to the files.
        values.ValueClass = values.get_value_class()

    def _registry(self):
        if self.directory is None and not os.environ.get(ENV):
            from prometheus_client import REGISTRY

            return REGISTRY
        from prometheus_client import CollectorRegistry, multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=self.directory or os.environ[ENV])
        return registry


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape; a client that stalls cannot hold the supervisor long."""

    timeout = 5

    def log_message(self, format, *args):
        pass
