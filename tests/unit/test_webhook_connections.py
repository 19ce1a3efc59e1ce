"""The connection layer's pure parts: the gateway that buffers a body and calls the WSGI app, and
the limits. (The deadline, the parser's 400s and the handshake bound are proved against a real server over
TLS in tests/integration/test_webhook_under_attack.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from webhook.connections import MAX_BODY_BYTES, ConnectionLimits, Message, WSGIGateway

LIMIT = 100


class Recorder:
    """The wrapped WSGI app: what it was called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], bytes]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.calls.append((environ, environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"o", b"k"]


def run(messages: list[dict[str, Any]], headers: list[tuple[bytes, bytes]]
        ) -> tuple[Recorder, list[Message], int]:
    app = Recorder()
    sent: list[Message] = []
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/validate/target-guard", "headers": headers, "method": "POST",
             "query_string": b"", "http_version": "1.1", "scheme": "https", "root_path": ""}
    asyncio.run(WSGIGateway(app, LIMIT)(scope, receive, send))
    return app, sent, len(pending)


def body(data: bytes, more: bool = False) -> dict[str, Any]:
    return {"type": "http.request", "body": data, "more_body": more}


def test_a_chunked_body_reaches_the_app_whole_with_its_length_known() -> None:
    app, sent, _ = run([body(b'{"a"', more=True), body(b": 1}")],
                       [(b"transfer-encoding", b"chunked"), (b"content-type", b"application/json")])
    [(environ, data)] = app.calls
    assert data == b'{"a": 1}'
    assert environ["CONTENT_LENGTH"] == "8" and "HTTP_TRANSFER_ENCODING" not in environ
    assert environ["CONTENT_TYPE"] == "application/json"
    assert sent == [{"type": "http.response.start", "status": 200,
                     "headers": [(b"content-type", b"text/plain")]},
                    {"type": "http.response.body", "body": b"ok"}]


def test_a_declared_length_over_the_limit_is_413_before_any_body_is_read_and_the_rest_dropped() -> None:
    app, sent, left = run([body(b"x" * 50, more=True), body(b"x" * 50, more=True), body(b"")],
                          [(b"content-length", str(LIMIT * 10).encode())])
    assert not app.calls and left == 0
    assert sent[0]["status"] == 413 and (b"connection", b"close") in sent[0]["headers"]
    assert b"larger than 100 bytes" in sent[1]["body"] and sent[-1]["more_body"] is False


def test_a_chunked_body_that_grows_over_the_limit_is_413_without_keeping_the_excess() -> None:
    chunks = [body(b"x" * 60, more=True) for _ in range(5)] + [body(b"")]
    app, sent, left = run(chunks, [(b"transfer-encoding", b"chunked")])
    assert not app.calls and left == 0
    assert sent[0]["status"] == 413


def test_a_body_exactly_at_the_limit_is_served() -> None:
    app, _, _ = run([body(b"x" * LIMIT)], [(b"content-length", str(LIMIT).encode())])
    assert [len(data) for _, data in app.calls] == [LIMIT]


def test_a_client_that_goes_away_mid_body_gets_nothing_and_never_reaches_the_app() -> None:
    app, sent, _ = run([body(b"x", more=True)], [(b"content-length", b"50")])
    assert not app.calls and not sent


@pytest.mark.parametrize("timeout,deadline", [(5, 2.5), (30, 15.0), (1, 0.5)])
def test_the_request_deadline_is_half_the_api_servers_timeout(timeout: int, deadline: float) -> None:
    limits = ConnectionLimits.for_timeout(timeout)
    assert limits.request_deadline_s == deadline < timeout
    assert limits.max_body_bytes == MAX_BODY_BYTES == 7 * 1024 * 1024
