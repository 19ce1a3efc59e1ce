"""The webhook's Prometheus metrics, in a registry of its own.

A private registry (not the process-global one) so that each app instance, in tests as in a
gunicorn worker, counts only its own requests. Latency buckets are fine below 10 ms because that
is the budget (docs/design/numbers.md); the certificate gauge lets an alert fire long before an expiry, the
failure users of self-signed webhooks hit most (Kyverno's expired CA).
"""

from __future__ import annotations

import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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
