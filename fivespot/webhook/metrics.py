"""The webhook's Prometheus metrics, in a registry of its own.

A private registry (not the process-global one) so that each app instance, in tests as in a
gunicorn worker, counts only its own requests. Latency buckets are fine below 10 ms because that
is the budget (docs/design/numbers.md); the certificate gauge lets an alert fire long before an expiry, the
failure users of self-signed webhooks hit most (Kyverno's expired CA).

Every label value comes from a closed set (`fivespot.webhook.bodies.check_label`, `status_label`, fixed
reasons): a value taken from a request would let any client add a time series per request
(security review F5). The registry is served only on the plain-HTTP metrics port (`serve`),
never on the serving port, which the API server's callers reach.
"""

from __future__ import annotations

import datetime
import socket
import socketserver
import threading
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

from fivespot.runtime.health import QuietServing

STATUSES: Final = frozenset({400, 403, 404, 405, 408, 413, 415, 431, 500, 503})
"""The HTTP statuses `rejected` counts by name; any other is counted as "other"."""


def status_label(status: int) -> str:
    return str(status) if status in STATUSES else "other"

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05, 0.1, 0.25,
                   0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "fivespot_webhook_admission_duration_seconds",
            "Time to decide one AdmissionReview, by check and verdict.",
            ["check", "verdict"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.rejected = Counter(
            "fivespot_webhook_rejected_bodies",
            "Bodies answered with an HTTP 4xx (not an AdmissionReview, too large, too slow).",
            ["check", "status"], registry=self.registry)
        self.connections_cut = Counter(
            "fivespot_webhook_connections_cut",
            "Connections closed before a whole request arrived (reason: deadline, "
            "headers-too-large): slow, stalled or hostile clients.",
            ["reason"], registry=self.registry)
        self.errors = Counter(
            "fivespot_webhook_review_errors",
            "Reviews that raised (answered as a denial with code 500); should stay 0.",
            ["check"], registry=self.registry)
        self.certificate_expiry = Gauge(
            "fivespot_webhook_certificate_expiry_timestamp_seconds",
            "When the certificate expires (Unix time): the serving certificate and, in "
            "self-managed mode, the newest CA.",
            ["certificate"], registry=self.registry)
        self.certificate_reloads = Counter(
            "fivespot_webhook_certificate_reloads",
            "Serving certificates loaded (the first one included).", registry=self.registry)

    def set_expiry(self, which: str, when: datetime.datetime | None) -> None:
        if when is not None:
            self.certificate_expiry.labels(which).set(when.timestamp())


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (one line per scrape would drown the webhook's log)."""


class _MetricsServer(QuietServing, socketserver.ThreadingMixIn, WSGIServer):
    """Waits for a scrape without waking twice a second for nothing (`QuietServing`)."""

    daemon_threads = True


class _SharedMetricsServer(_MetricsServer):
    allow_reuse_port = True
    """Several workers listen on one port; each scrape reaches one of them."""


def serve(registry: CollectorRegistry, port: int, bind: str, shared: bool) -> WSGIServer:
    """Serve `registry` over plain HTTP on `bind`:`port` from a daemon thread; `shared` when
    every gunicorn worker of the process serves its own registry on the same port."""
    server_class: type[WSGIServer] = _SharedMetricsServer if shared else _MetricsServer
    if ":" in bind:
        server_class = type("IPv6" + server_class.__name__, (server_class,),
                            {"address_family": socket.AF_INET6})
    server = make_server(bind, port, make_wsgi_app(registry), server_class,
                         handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
