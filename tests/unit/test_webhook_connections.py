"""The connection layer's pure parts: the gateway that buffers a body and calls the WSGI app
(per-path limits, bounded admission of large bodies, the client-certificate refusal), and the
limits. (The deadline, the parser's 400s and the handshake bound are proved against a real server
over TLS in tests/integration/test_webhook_under_attack.py.)"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from fivespot.webhook.bodies import OTHER_BYTES, SCAP_REVIEW_BYTES, body_limit, check_label
from fivespot.webhook.connections import (
    GATE_EXTENSION,
    MAX_BODY_BYTES,
    BodyLimit,
    ConnectionLimits,
    Message,
    Served,
    WSGIGateway,
    json_values,
)

LIMIT = 100
LIMITS = ConnectionLimits(request_deadline_s=1.0, max_body_bytes=LIMIT, small_body_bytes=40,
                          large_bodies=1)


class Recorder:
    """The wrapped WSGI app: what it was called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], bytes]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.calls.append((environ, environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"o", b"k"]


def run(messages: list[dict[str, Any]], headers: list[tuple[bytes, bytes]],
        gateway: WSGIGateway | None = None, path: str = "/validate/target-guard",
        method: str = "POST", refusal: str | None = None, stays: bool = False
        ) -> tuple[Recorder, list[Message], int]:
    """Serve one request of `messages`; then the client disconnects, or with `stays` it keeps
    the connection open and silent (a gateway that waits for it fails the 2 s bound)."""
    gateway = gateway or WSGIGateway(Recorder(), LIMITS)
    app = gateway.app
    assert isinstance(app, Recorder)
    sent: list[Message] = []
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        if not pending and stays:
            await asyncio.Event().wait()
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "path": path, "headers": headers, "method": method,
             "query_string": b"", "http_version": "1.1", "scheme": "https", "root_path": "",
             "extensions": {GATE_EXTENSION: refusal}}
    asyncio.run(asyncio.wait_for(gateway(scope, receive, send), 2))
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


def test_each_check_has_the_body_limit_its_reviews_need() -> None:
    assert body_limit("/validate/host-governance").size == SCAP_REVIEW_BYTES == 2 * 1024 * 1024
    assert body_limit("/validate/field-governance") == body_limit("/validate/vap-polyfill") \
        == body_limit("/validate/host-governance")
    assert body_limit("/validate/target-guard").size == MAX_BODY_BYTES
    for other in ("/validate/", "/validate/nope", "/metrics", "/validate/target-guard/x", "/"):
        assert body_limit(other).size == OTHER_BYTES
        assert check_label(other) == "unknown"
    assert check_label("/validate/target-guard") == "target-guard"


def test_json_values_over_counts_never_under_counts() -> None:
    body = json.dumps({"a": [1, 2, {"b": "x,y"}], "c": []}).encode()
    assert json_values(body) >= 7  # a, the list, 1, 2, the object, b, c's list
    assert json_values(b"[[[]]],[[[]]]") == 7


def test_a_large_body_with_more_values_than_its_path_allows_is_413_before_it_is_parsed() -> None:
    gateway = WSGIGateway(Recorder(), LIMITS, lambda _path: BodyLimit(LIMIT, 20))
    dense = b"[" + b"[]," * 20 + b"[]]"
    app, sent, _ = run([body(dense)], [(b"content-length", str(len(dense)).encode())], gateway)
    assert not app.calls and sent[0]["status"] == 413
    assert b"more than 20 JSON values" in sent[1]["body"]
    sparse = b'["' + b"x" * 60 + b'"]'
    app, sent, _ = run([body(sparse)], [(b"content-length", str(len(sparse)).encode())], gateway)
    assert len(app.calls) == 1 and sent[0]["status"] == 200


def test_a_declared_length_over_the_paths_limit_is_413_though_under_the_ceiling() -> None:
    gateway = WSGIGateway(Recorder(), ConnectionLimits(request_deadline_s=1.0), body_limit)
    declared = SCAP_REVIEW_BYTES + 1
    app, sent, _ = run([body(b"", more=False)], [(b"content-length", str(declared).encode())],
                       gateway, path="/validate/host-governance")
    assert not app.calls and sent[0]["status"] == 413
    assert str(SCAP_REVIEW_BYTES).encode() in sent[1]["body"]


def test_a_large_body_without_a_free_slot_gets_503_at_once_and_a_small_one_is_still_served() -> None:
    gateway = WSGIGateway(Recorder(), LIMITS)
    assert gateway.large.take()  # the only slot is held by another large body
    app, sent, left = run([body(b"x" * 50)], [(b"content-length", b"50")], gateway)
    assert not app.calls and left == 0
    assert sent[0]["status"] == 503 and (b"retry-after", b"1") in sent[0]["headers"]
    app, sent, _ = run([body(b"x" * 30)], [(b"content-length", b"30")], gateway)
    assert [len(data) for _, data in app.calls] == [30] and sent[0]["status"] == 200


def test_a_chunked_body_growing_past_the_small_size_needs_a_slot_too() -> None:
    gateway = WSGIGateway(Recorder(), LIMITS)
    assert gateway.large.take()
    chunks = [body(b"x" * 30, more=True), body(b"x" * 30, more=True), body(b"")]
    app, sent, _ = run(chunks, [(b"transfer-encoding", b"chunked")], gateway)
    assert not app.calls and sent[0]["status"] == 503


def test_a_large_body_gives_its_slot_back_once_answered() -> None:
    gateway = WSGIGateway(Recorder(), LIMITS)
    for _ in range(3):
        app, sent, _ = run([body(b"x" * 50)], [(b"content-length", b"50")], gateway)
        assert sent[0]["status"] == 200
        chunked, sent, _ = run([body(b"x" * 30, more=True), body(b"x" * 30)],
                               [(b"transfer-encoding", b"chunked")], gateway)
        assert sent[0]["status"] == 200
    assert gateway.large.free == 1
    assert len(gateway.app.calls) == 6  # type: ignore[attr-defined]


def test_a_caller_refused_at_the_handshake_gets_403_and_its_body_is_never_read() -> None:
    app, sent, left = run([body(b"{}")], [(b"content-length", b"2")],
                          refusal="no client certificate was presented")
    assert not app.calls and left == 1
    assert sent[0]["status"] == 403 and sent[-1]["more_body"] is False
    assert b"no client certificate was presented" in sent[1]["body"]


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_a_caller_without_an_accepted_certificate_may_still_probe(path: str) -> None:
    app, sent, _ = run([body(b"")], [], path=path, method="GET", refusal="no certificate")
    assert len(app.calls) == 1 and sent[0]["status"] == 200
    app, sent, _ = run([body(b"")], [], path=path, method="POST", refusal="no certificate")
    assert not app.calls and sent[0]["status"] == 403


def test_a_body_refused_once_whole_frees_its_slot_though_its_client_stays_connected() -> None:
    """Nothing is left to drain, so the gateway does not wait for the client: a client that
    keeps quiet after an over-budget body cannot hold a large-body slot."""
    gateway = WSGIGateway(Recorder(), LIMITS, lambda _path: BodyLimit(LIMIT, 20))
    dense = b"[" + b"[]," * 20 + b"[]]"
    for _ in range(3):
        app, sent, _ = run([body(dense)], [(b"content-length", str(len(dense)).encode())],
                           gateway, stays=True)
        assert sent[0]["status"] == 413 and sent[-1]["more_body"] is False
    assert gateway.large.free == 1


def test_an_idle_webhook_worker_ticks_every_five_seconds_and_does_its_periodic_work_each_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's server loop woke ten times a second; the worker's `QuietServer` waits 5 s
    between ticks (decision 0040), and every tick is one on which uvicorn refreshes the Date
    header and notifies gunicorn (counter % 10 == 0)."""
    from uvicorn.config import Config

    from fivespot.webhook.connections import QuietServer

    waits: list[float | None] = []
    real_wait_for = asyncio.wait_for

    async def wait_for(awaitable: Any, timeout: float | None) -> Any:
        waits.append(timeout)
        return await real_wait_for(awaitable, 0.001)

    monkeypatch.setattr("fivespot.webhook.connections.asyncio.wait_for", wait_for)
    server = QuietServer(config=Config(app=lambda *a: None))
    ticks: list[int] = []

    async def on_tick(counter: int) -> bool:
        ticks.append(counter)
        return len(ticks) > 5

    monkeypatch.setattr(server, "on_tick", on_tick)
    asyncio.run(server.main_loop())
    assert waits == [5.0] * 5
    assert ticks == [0] * 6


def test_a_stop_signal_ends_an_idle_webhook_worker_at_once_not_at_its_next_tick() -> None:
    import signal
    import time

    from uvicorn.config import Config

    from fivespot.webhook.connections import QuietServer

    server = QuietServer(config=Config(app=lambda *a: None))

    async def main() -> float:
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, server.handle_exit, signal.SIGTERM, None)
        started = time.monotonic()
        await server.main_loop()
        return time.monotonic() - started

    assert asyncio.run(main()) < 1.0  # a whole tick (5 s; 1 s before) would be longer


def test_a_response_date_is_brought_to_the_current_second_only_when_it_is_stale() -> None:
    from fivespot.webhook.connections import fresh_date

    stale = [(b"date", b"Sun, 06 Dec 2026 12:00:00 GMT"), (b"x-other", b"1")]
    now = 1796558405.7  # 2026-12-06 12:00:05.7 UTC
    assert fresh_date(stale, now) == [(b"date", b"Sun, 06 Dec 2026 12:00:05 GMT"),
                                      (b"x-other", b"1")]
    current = fresh_date(stale, now)
    assert fresh_date(current, now + 0.2) is current
    assert fresh_date([(b"x-other", b"1")], now) == [(b"x-other", b"1")], "no Date: none added"


def test_an_idle_webhook_master_wakes_every_five_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """gunicorn's arbiter waits for a signal for 1 s per loop; `QuietArbiter` for 5 s (signals
    still wake it at once: they are what it waits for)."""
    from gunicorn.arbiter import Arbiter

    from fivespot.webhook.connections import QuietArbiter

    asked: list[float] = []

    def wait_for_signals(self: Arbiter, timeout: float = 1.0) -> list[int]:
        asked.append(timeout)
        return []

    monkeypatch.setattr(Arbiter, "wait_for_signals", wait_for_signals)
    arbiter = QuietArbiter.__new__(QuietArbiter)
    assert arbiter.wait_for_signals(timeout=1.0) == []
    assert asked == [5.0]


class Waiting:
    """A WSGI app whose field-governance reviews wait (as on the API server) until released; any
    other review is answered at once. `order` is when each finished."""

    def __init__(self) -> None:
        import threading
        self.release = threading.Event()
        self.order: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        path = environ["PATH_INFO"]
        if path.endswith("/field-governance"):
            self.release.wait(2.0)
        self.order.append(path)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]


def test_a_review_that_waits_on_the_api_server_does_not_hold_the_other_reviews() -> None:
    from fivespot.webhook.bodies import waits
    app = Waiting()
    gateway = WSGIGateway(app, LIMITS, waits=waits)

    async def one(path: str, sent: list[Message]) -> None:
        async def receive() -> dict[str, Any]:
            return body(b"{}")

        async def send(message: Message) -> None:
            sent.append(message)

        scope = {"type": "http", "path": path, "headers": [(b"content-length", b"2")],
                 "method": "POST", "query_string": b"", "http_version": "1.1", "scheme": "https",
                 "root_path": "", "extensions": {GATE_EXTENSION: None}}
        await gateway(scope, receive, send)

    async def both() -> tuple[list[Message], list[Message]]:
        slow: list[Message] = []
        fast: list[Message] = []
        waiting = asyncio.create_task(one("/validate/field-governance", slow))
        await asyncio.sleep(0.05)  # the field-governance review is waiting on its thread
        await asyncio.wait_for(one("/validate/target-guard", fast), 1.0)
        assert not slow, "still waiting"
        app.release.set()
        await asyncio.wait_for(waiting, 2.0)
        return slow, fast

    slow, fast = asyncio.run(both())
    assert app.order == ["/validate/target-guard", "/validate/field-governance"]
    assert slow[0]["status"] == fast[0]["status"] == 200 and slow[1]["body"] == b"ok"


@pytest.mark.parametrize(("path", "waiting"), [
    ("/validate/field-governance", True), ("/validate/target-guard", False),
    ("/validate/host-governance", False), ("/validate/vap-polyfill", False),
    ("/validate/nothing", False), ("/healthz", False)])
def test_only_the_checks_that_read_the_api_server_are_served_off_the_loop(
        path: str, waiting: bool) -> None:
    from fivespot.webhook.bodies import waits
    assert waits(path) is waiting


def test_a_direct_answer_is_sent_as_it_is_and_the_wsgi_app_is_not_called() -> None:
    seen: list[tuple[str, str, bytes]] = []

    def answer(method: str, path: str, data: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        seen.append((method, path, data))
        return 200, [(b"content-type", b"application/json"), (b"content-length", b"2")], b"{}"

    gateway = WSGIGateway(Served(Recorder(), answer), LIMITS)
    app, sent, _ = run([body(b"abc")], [(b"content-length", b"3")], gateway)
    assert seen == [("POST", "/validate/target-guard", b"abc")] and app.calls == []
    assert sent[0]["status"] == 200 and sent[1]["body"] == b"{}"


def test_a_request_the_direct_answer_declines_goes_to_the_wsgi_app() -> None:
    gateway = WSGIGateway(Served(Recorder(), lambda method, path, data: None), LIMITS)
    app, sent, _ = run([body(b"abc")], [(b"content-length", b"3")], gateway)
    assert len(app.calls) == 1 and sent[1]["body"] == b"ok"
