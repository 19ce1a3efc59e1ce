"""The Flask app: thin views over `fivespot.webhook.review`, plus health, readiness and metrics.

A review is answered by `admit`: it parses the AdmissionReview, calls the pure `review`, and
writes the AdmissionReview back. The Flask view calls it, and so does the server's direct path
(`direct`: `fivespot.webhook.connections.Served`), which answers every review the webhook gets
without building a WSGI environ or a Flask request (a third of the serving CPU per review). The metrics are not served here: this app answers on the serving port,
which every caller of the webhook reaches (`fivespot.webhook.metrics.serve` has them on the metrics port). Under the server the body has already arrived whole, within the request
deadline and the size limit (`fivespot.webhook.connections`: malformed HTTP, slow clients and oversized
bodies never reach a view). What a caller can get wrong beyond that is answered, never crashed
on:
- not JSON, not an AdmissionReview v1, no request uid: HTTP 400 with a JSON explanation (there is
  no uid to answer to);
- a review with fields missing or of the wrong type: a well-formed denial (code 400) naming the
  field;
- a body over its check's limit (`fivespot.webhook.bodies`; the same limits, for the app on its own, as in
  tests): 413;
- an unexpected exception in a check: logged, counted, and answered as a denial with code 500
  inside an HTTP 200, so the API server applies the webhook's failurePolicy to a clear message
  instead of to a transport error.
"""

from __future__ import annotations

import datetime
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from fivespot.webhook.bodies import BODY_LIMITS, UNKNOWN_CHECK, check_of
from fivespot.webhook.bundle import WebhookBundle
from fivespot.webhook.connections import MAX_BODY_BYTES, Answer, DirectAnswer, Served
from fivespot.webhook.metrics import Metrics, status_label
from fivespot.webhook.review import CHECKS, Lookups, Rejected, deny, parse_review, review

log = logging.getLogger(__name__)

JSON: Final = "application/json"

Readiness = Callable[[], list[str]]
"""What keeps the pod from being ready (an empty list: ready)."""


@dataclass(frozen=True)
class Runtime:
    """Everything a view needs besides the request."""

    bundle: WebhookBundle
    lookups: Lookups
    metrics: Metrics
    readiness: Readiness


def _refusal(status: int, message: str, check: str, metrics: Metrics) -> tuple[int, bytes]:
    metrics.rejected.labels(check, status_label(status)).inc()
    return status, json.dumps({"error": message}).encode()


def _error(status: int, message: str, check: str, metrics: Metrics) -> Response:
    status, payload = _refusal(status, message, check, metrics)
    return Response(payload, status=status, mimetype=JSON)


def admit(runtime: Runtime, check: str, body: bytes) -> tuple[int, bytes]:
    """The answer to one AdmissionReview for `check` (one of `CHECKS`; the body whole and within
    the check's limit): the HTTP status and the JSON body."""
    metrics = runtime.metrics
    started = time.perf_counter()
    try:
        admission_request = parse_review(body)
    except Rejected as rejected:
        return _refusal(rejected.status, rejected.message, check, metrics)
    try:
        decided = review(check, admission_request, runtime.bundle, runtime.lookups)
    except Exception:
        log.exception("%s: the review of %s raised", check, admission_request.get("uid"))
        metrics.errors.labels(check).inc()
        decided = deny(str(admission_request["uid"]), 500, "InternalError",
                       f"{check}: the webhook failed to decide this request (its logs have the "
                       "details); retry, and report it if it persists")
    payload = json.dumps(decided.review(), separators=(",", ":")).encode()
    metrics.latency.labels(check, decided.verdict).observe(time.perf_counter() - started)
    return 200, payload


def direct(runtime: Runtime) -> DirectAnswer:
    """The server's answer to `POST /validate/<check>` of a known check, made by `admit`
    without Flask (anything else goes to the app: probes, 404s, other methods)."""
    def answer(method: str, path: str, body: bytes) -> Answer | None:
        check = check_of(path)
        if method != "POST" or check is None:
            return None
        status, payload = admit(runtime, check, body)
        return status, [(b"content-type", JSON.encode()),
                        (b"content-length", str(len(payload)).encode())], payload

    return answer


def served(runtime: Runtime) -> Served:
    """What a webhook worker serves: the Flask app, and the reviews answered directly."""
    return Served(create_app(runtime), direct(runtime))


def create_app(runtime: Runtime) -> Flask:
    app = Flask("fivespot-webhook")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    metrics = runtime.metrics

    @app.post("/validate/<check>")
    def validate(check: str) -> Response:
        if check not in CHECKS:
            return _error(404, f"no check {check!r}; the checks are {', '.join(CHECKS)}",
                          UNKNOWN_CHECK, metrics)
        if (request.content_length or 0) > BODY_LIMITS[check].size:
            return _error(413, f"the body is larger than {BODY_LIMITS[check].size} bytes; an "
                          "AdmissionReview for this path never is", check, metrics)
        try:
            body = request.get_data(cache=False)
        except HTTPException as error:  # 413 over the limit, 400 on a truncated body
            return _error(error.code or 400, error.description or "bad body", check, metrics)
        status, payload = admit(runtime, check, body)
        return Response(payload, status=status, mimetype=JSON)

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok\n", mimetype="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        problems = runtime.readiness()
        if problems:
            return Response("not ready:\n" + "".join(f"- {p}\n" for p in problems), status=503,
                            mimetype="text/plain")
        return Response("ok\n", mimetype="text/plain")

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response:
        return _error(error.code or 400, error.description or error.name, "none", metrics)

    return app


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)
