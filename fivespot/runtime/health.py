"""`/healthz`, `/readyz` and `/metrics` on one small HTTP server (port 8080 in the Deployment).

Liveness says the process's loops are running; readiness says this replica can be trusted to
act: its caches are synced and no watch has stalled. A stalled watch therefore takes the pod out
of readiness, where an operator and an alert see it, instead of leaving a controller that
silently stopped seeing events (the kopf failure mode).

The server waits for a connection without a timeout (`QuietServing`): the standard library's
`serve_forever` wakes every half second to check for a stop, two wake-ups a second of every
idle process for nothing (decision 0040).
"""

from __future__ import annotations

import logging
import os
import selectors
import socketserver
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

log = logging.getLogger("fivespot.health")

Check = Callable[[], bool]


class QuietServing(socketserver.TCPServer):
    """A socketserver mixin (list it before the server class) whose `serve_forever` blocks until
    a connection arrives or `shutdown` wakes it through a pipe, instead of polling for the stop.
    `shutdown` waits for the loop to end; as with the standard library's, call it only once
    `serve_forever` runs (from another thread)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._stop_serving = threading.Event()
        self._served = threading.Event()
        self._wake_read, self._wake_write = os.pipe()
        self._wake_fds: tuple[int, ...] = (self._wake_read, self._wake_write)
        self._closing = threading.Lock()
        super().__init__(*args, **kwargs)

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Handle requests until `shutdown` (`poll_interval` is the base signature's, unused)."""
        self._served.clear()
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self, selectors.EVENT_READ)
                selector.register(self._wake_read, selectors.EVENT_READ)
                while not self._stop_serving.is_set():
                    for key, _ in selector.select():
                        if key.fileobj != self._wake_read and not self._stop_serving.is_set():
                            # the standard loop's own step: accept and handle one connection
                            self._handle_request_noblock()  # type: ignore[attr-defined]
        finally:
            self._served.set()

    def shutdown(self) -> None:
        self._stop_serving.set()
        with self._closing:
            if self._wake_fds:  # else closed after an earlier stop: the loop has ended
                os.write(self._wake_write, b"\0")
        self._served.wait()

    def server_close(self) -> None:
        super().server_close()
        with self._closing:
            fds, self._wake_fds = self._wake_fds, ()
        for fd in fds:  # once: a second close could hit a descriptor reused since
            os.close(fd)


class _HealthHTTPServer(QuietServing, ThreadingHTTPServer):
    daemon_threads = True


class HealthServer:
    """Serves the probes and metrics; checks are named callables returning True when fine."""

    def __init__(self, port: int, host: str = "0.0.0.0"):
        self._liveness: dict[str, Check] = {}
        self._readiness: dict[str, Check] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/livez"):
                    self._report(server._run(server._liveness))
                elif path == "/readyz":
                    self._report(server._run(server._readiness))
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _report(self, failing: list[str]) -> None:
                if failing:
                    body = "".join(f"[-] {name} failed\n" for name in failing).encode()
                    self._send(503, body, "text/plain")
                else:
                    self._send(200, b"ok\n", "text/plain")

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # probes every few seconds are not news

        self._httpd = _HealthHTTPServer((host, port), Handler)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def add_liveness(self, name: str, check: Check) -> None:
        with self._lock:
            self._liveness[name] = check

    def add_readiness(self, name: str, check: Check) -> None:
        with self._lock:
            self._readiness[name] = check

    def _run(self, checks: dict[str, Check]) -> list[str]:
        with self._lock:
            items = sorted(checks.items())
        failing = []
        for name, check in items:
            try:
                ok = check()
            except Exception:
                log.exception("health check raised", extra={"check": name})
                ok = False
            if not ok:
                failing.append(name)
        return failing

    def start(self) -> None:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="health", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
