"""Health probes: ``/healthz`` (liveness) and ``/readyz`` (readiness), controller-runtime style.

Each probe is a set of named checks, functions returning ``None`` when healthy
or a short reason string. ``GET /readyz?verbose`` lists every check, like
kube-apiserver's ``/readyz?verbose``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["Check", "HealthServer"]

log = logging.getLogger(__name__)

Check = Callable[[], str | None]


class HealthServer:
    """Serves ``/healthz`` and ``/readyz`` from registered checks on a background thread.

    Args:
        host, port: where to listen, as parsed by :func:`zkop.runtime.metrics.parse_bind_address`
            (host ``""`` means every IPv4 interface; port 0 picks a free port, see :attr:`port`).
    """

    def __init__(self, host: str, port: int) -> None:
        self.liveness: dict[str, Check] = {}
        self.readiness: dict[str, Check] = {}
        checks = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                probes = {"/healthz": checks.liveness, "/livez": checks.liveness, "/readyz": checks.readiness}
                if path not in probes:
                    self.send_error(404)
                    return
                failures = {name: why for name, check in probes[path].items() if (why := _run(check))}
                lines = [
                    f"[-]{name} failed: {failures[name]}" if name in failures else f"[+]{name} ok"
                    for name in probes[path]
                ]
                body = ("\n".join(lines) + "\n" if "verbose" in query or failures else "ok\n").encode()
                self.send_response(500 if failures else 200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((host or "0.0.0.0", port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="health", daemon=True)

    def start(self) -> None:
        """Start serving."""
        self._thread.start()

    def shutdown(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()


def _run(check: Check) -> str | None:
    try:
        return check()
    except Exception as err:  # a failing check is unhealthy, not a crash
        return f"{type(err).__name__}: {err}"
