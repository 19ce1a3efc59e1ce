"""The connection layer: why no set of slow, stalled or malformed clients can starve admission.

A thread-per-request server (gunicorn's gthread worker, which the webhook used before) reads a
request inside the thread that will answer it, so eight clients sending one byte a second held
all eight threads and every real AdmissionReview waited. Here connections cost no thread at all
until a whole request has arrived:

- **Event-driven I/O.** Each gunicorn worker runs uvicorn (via `uvicorn-worker`) on a uvloop
  event loop: TLS handshakes, HTTP parsing (httptools) and body reads all happen on the loop,
  where an idle or slow connection is a few kilobytes of buffer, not a thread. Connections are
  bounded by file descriptors, not by a thread count.
- **A whole-request deadline per connection** (`ConnectionLimits.request_deadline_s`, by default
  half the webhook's timeoutSeconds, so always shorter than the API server's patience): from
  accept (the TLS handshake included) or from the first byte of a kept-alive connection's next
  request, to the last byte of its body. A client that has not sent a whole request by then gets
  a 408 and is closed, logged as one line, never a traceback. Trickling bytes does not extend it.
- **Bounded sizes.** Request line and headers over `max_head_bytes`: 431. A body over
  `max_body_bytes`, declared or chunked: 413, without buffering the excess; the rest of the body
  is read and dropped until it ends or the deadline cuts it, so the client reads the 413 instead
  of a reset. Malformed framing (bad chunk sizes, missing CRLFs, bad trailers, conflicting
  lengths) is rejected by the parser with a 400.
- **Only complete requests reach the app.** `WSGIGateway` reads the whole body on the loop and
  only then calls the WSGI app (Flask; the environ built by a2wsgi), on the loop itself: what it
  does is pure CPU work with no I/O to wait on, so no client can hold it.

The deadline is an absolute time per request, so a client needs to finish a request within it to
hold a connection any longer, and then it is a kept-alive connection like the API server's own.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, cast

import uvloop
from a2wsgi.wsgi import build_environ
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn_worker import UvicornWorker

log = logging.getLogger("fivespot.webhook")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY_BYTES: Final = 7 * 1024 * 1024
"""The API server accepts request bodies up to 3 MiB, and a review of an UPDATE carries both the
new and the old object, so a legitimate review can approach twice that."""
MAX_HEAD_BYTES: Final = 64 * 1024
"""The API server sends a request line and a handful of headers: far below this."""


@dataclass(frozen=True)
class ConnectionLimits:
    request_deadline_s: float
    max_body_bytes: int = MAX_BODY_BYTES
    max_head_bytes: int = MAX_HEAD_BYTES

    @classmethod
    def for_timeout(cls, webhook_timeout_s: float) -> "ConnectionLimits":
        """Half the API server's webhook timeout: a request that has not arrived by then could not
        be answered in time anyway, and the API server sends its requests in milliseconds."""
        return cls(request_deadline_s=max(webhook_timeout_s / 2, 0.5))


CutObserver = Callable[[str], None]
"""Told the reason each time a connection is cut (a metric counter, in the server)."""


def _json_response(status: int, reason: str, message: str) -> bytes:
    body = json.dumps({"error": message}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


_observer: CutObserver | None = None


def observe_cuts(observer: CutObserver | None) -> None:
    """Tell `observer` about this worker's cut connections (called in the worker, after fork)."""
    global _observer
    _observer = observer


class DeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol plus the whole-request deadline and the head-size limit."""

    limits: ClassVar[ConnectionLimits]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The server builds the protocol when it accepts the connection, before the TLS
        # handshake: the first request's deadline counts from here.
        self._deadline: asyncio.TimerHandle | None = self.loop.call_later(
            self.limits.request_deadline_s, self._expire)
        self._expired = False
        self._in_head = True
        self._head_bytes = 0

    # --- the connection ---

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self._expired:  # the handshake finished only after the deadline
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        counting = self._in_head
        super().data_received(data)
        if not (counting and self._in_head) or self.transport.is_closing():
            return
        # Still in the head after this chunk (the parser buffers a header until it ends, so
        # this is what bounds the memory a never-ending header can take).
        self._head_bytes += len(data)
        if self._head_bytes > self.limits.max_head_bytes:
            self._refuse(431, "Request Header Fields Too Large",
                         f"the request line and headers exceed {self.limits.max_head_bytes} "
                         "bytes", "headers-too-large")

    # --- the parser's callbacks ---

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # the next request on a kept-alive connection
            self._deadline = self.loop.call_later(self.limits.request_deadline_s, self._expire)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()
        self._in_head, self._head_bytes = True, 0

    # --- cutting ---

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        self._expired = True
        deadline = self.limits.request_deadline_s
        if self.transport is None:
            log.warning("a client did not finish its TLS handshake within %gs; disconnected it "
                        "(stalled or too slow)", deadline)
            self._observe("deadline")
            return
        phase = "headers" if self._in_head else "body"
        self._refuse(408, "Request Timeout",
                     f"the request did not arrive within {deadline:g}s", "deadline",
                     f"closed the connection from {self._peer()}: it did not send a whole request "
                     f"within {deadline:g}s (stalled or too slow, in its {phase})")

    def _refuse(self, status: int, reason: str, message: str, cause: str,
                logged: str | None = None) -> None:
        """Answer `status` unless a response is already under way, then close."""
        log.warning("%s", logged or
                    f"closed the connection from {self._peer()}: {message} ({status})")
        self._observe(cause)
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete or not self.cycle.response_started:
            self.transport.write(_json_response(status, reason, message))
        self.transport.close()

    def _peer(self) -> str:
        return "%s:%d" % self.client if self.client else "an unknown peer"

    @staticmethod
    def _observe(cause: str) -> None:
        if _observer is not None:
            _observer(cause)


WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class WSGIGateway:
    """The ASGI app the server runs: reads a request's whole body on the event loop (bounded),
    then calls the WSGI app (Flask) right there and sends its answer.

    On the loop, not in a thread pool: what the app does is pure CPU work on in-memory caches
    (no I/O to wait on), so a thread would add only a hand-off each way — measured, the no-op
    responder cost 0.6-1.0 ms of CPU per request inline against 1.4-2.0 ms through a2wsgi's
    thread pool. And no client can hold the loop: it reaches the app only with a whole request.
    """

    def __init__(self, app: WSGIApp, max_body_bytes: int,
                 on_too_large: Callable[[str], None] | None = None) -> None:
        self.app, self.max_body_bytes, self.on_too_large = app, max_body_bytes, on_too_large

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        declared = _content_length(scope)
        body = bytearray()
        more = True
        while more:
            if declared is not None and declared > self.max_body_bytes or \
                    len(body) > self.max_body_bytes:
                await self._too_large(scope, receive, send)
                return
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = bool(message.get("more_body", False))
        if len(body) > self.max_body_bytes:
            await self._too_large(scope, receive, send)
            return
        status, headers, payload = self._call(scope, bytes(body))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    def _call(self, scope: Scope, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        environ: dict[str, Any] = dict(build_environ(cast(Any, scope), cast(Any, io.BytesIO(body))))
        # The length is known now, whatever the framing was (WSGI reads a body without a
        # Content-Length as empty).
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        answer: list[Any] = []
        chunks: list[bytes] = []

        def start_response(status: str, headers: list[tuple[str, str]],
                           exc_info: Any = None) -> Callable[[bytes], None]:
            answer[:] = [status, headers]  # nothing is sent before the app returns
            return chunks.append

        result = self.app(environ, start_response)
        try:
            chunks.extend(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        status, headers = answer
        return (int(status.split(" ", 1)[0]),
                [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
                b"".join(chunks))

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.on_too_large is not None:
            self.on_too_large(str(scope.get("path", "")))
        payload = json.dumps({"error": f"the body is larger than {self.max_body_bytes} bytes; an "
                                       "AdmissionReview never is"}).encode()
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
            (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": payload, "more_body": True})
        while (message := await receive())["type"] == "http.request" and message.get("more_body"):
            pass  # dropped: read to the end (or to the deadline) so the client sees the 413
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


# --- the worker ----------------------------------------------------------------------------------


class DeadlineLoop(uvloop.Loop):
    """A uvloop loop whose servers give up on a TLS handshake at the request deadline (uvicorn
    does not pass `ssl_handshake_timeout`, and the default is 60 s)."""

    handshake_timeout_s: float = 60.0

    async def create_server(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("ssl_handshake_timeout", self.handshake_timeout_s)
        return await super().create_server(*args, **kwargs)


SSLContextFactory = Callable[[Any, Callable[[], ssl.SSLContext]], ssl.SSLContext]


class AdmissionWorker(UvicornWorker):  # type: ignore[misc]
    """gunicorn worker: uvicorn on a `DeadlineLoop` with `DeadlineProtocol`. `configure` makes a
    subclass carrying the limits and the TLS context hook (gunicorn instantiates the class)."""

    limits: ClassVar[ConnectionLimits]

    @classmethod
    def configure(cls, limits: ConnectionLimits,
                  ssl_context_factory: SSLContextFactory | None) -> type["AdmissionWorker"]:
        protocol = type("AdmissionProtocol", (DeadlineProtocol,), {"limits": limits})
        kwargs = {
            "loop": "none", "http": protocol, "lifespan": "off", "interface": "asgi3",
            "proxy_headers": False, "server_header": False,
            "ssl_context_factory": ssl_context_factory,
        }
        return type("AdmissionWorker", (cls,), {"limits": limits, "CONFIG_KWARGS": kwargs})

    def run(self) -> None:
        deadline = self.limits.request_deadline_s

        def new_loop() -> asyncio.AbstractEventLoop:
            loop = DeadlineLoop()
            loop.handshake_timeout_s = deadline
            return loop

        with asyncio.Runner(loop_factory=new_loop) as runner:
            runner.run(self._serve())
