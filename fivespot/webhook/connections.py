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
  does is pure CPU work with no I/O to wait on, so no client can hold it. An AdmissionReview is
  answered without the WSGI app when the app offers a direct answer (`Served.direct`, the
  webhook's `fivespot.webhook.app.direct`: the same function its Flask view calls), which saves
  the environ and the framework on the path every write the webhook reviews takes. The one exception is a
  check that may read the API server (field governance lists a namespace's autoscalers and
  re-reads a rival before a denial, decision 0029): its paths (`waits`) are called on a thread
  of their own pool (`WAITING_THREADS`), so a burst of ScheduledCapacity creates never holds the
  loop, nor the target guard's reviews of the capacity controller's writes behind it.
- **Per-path body limits** (`BodyLimit`, the check's own: `fivespot.webhook.bodies`): a size, applied to
  the declared length before a byte of the body is buffered and to a chunked body as it
  arrives, and a count of JSON values, checked before the body is parsed. Parsing costs per
  value, not per byte (7 MiB of `[[[]]],...` is 3 million lists: seconds of CPU and ~200 MiB),
  and counting `,` `:` `[` `{` (strings included, so an over-count) takes milliseconds.
- **Bounded admission of large bodies.** Parsing is the one costly step on the loop (7 MiB of
  `[{},{},...]` is seconds of CPU and ~180 MiB of objects), so fast clients sending expensive
  bodies, not slow ones, are what could starve it. A body over `small_body_bytes` (64 KiB: an
  AdmissionReview of a ScheduledCapacity or a typical consumer object is a few KiB) needs one of
  `large_bodies` slots from its first byte to its answer; without a free slot it gets a 503 at
  once, unbuffered. Large bodies are parsed one at a time, so between two of them the loop
  serves everything else that is ready: a small review waits behind at most one large parse per
  step, whatever a flood of large bodies does, and their memory is bounded by the slots. Small
  bodies never wait for a slot.
- **Client certificates** (`ClientGate`, when the webhook verifies its callers): a connection
  whose certificate is missing or names nobody allowed gets a 403 for everything but the probes,
  before its body is read: it never reaches a review.

The deadline is an absolute time per request, so a client needs to finish a request within it to
hold a connection any longer, and then it is a kept-alive connection like the API server's own.

An idle webhook sleeps (decision 0040): the master (`QuietArbiter`) and each worker
(`QuietServer`) wake every few seconds for gunicorn's worker watchdog, not once a second, a stop
wakes them at once, and a response's Date header is brought up to the second as the response is
made (`fresh_date`) instead of by uvicorn's once-a-second tick.
"""

from __future__ import annotations

import asyncio
import gc
import io
import json
import logging
import signal
import ssl
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.utils import formatdate
from types import FrameType
from typing import Any, ClassVar, Final, cast

import uvloop
from a2wsgi.wsgi import build_environ
from gunicorn.arbiter import Arbiter
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import Server
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
SMALL_BODY_BYTES: Final = 64 * 1024
"""Bodies up to this size are parsed in a few milliseconds and never wait for a large-body slot."""
LARGE_BODIES: Final = 4
"""Large bodies received or parsed at once: 4 x 7 MiB buffered, one parse's objects alive."""
WAITING_THREADS: Final = 4
"""Reviews that wait on the API server at once (`WSGIGateway.waits`); more queue for a thread,
never for the loop."""
PROBE_PATHS: Final = frozenset({"/healthz", "/readyz"})
"""What a caller without an accepted client certificate may still GET: the kubelet's probes,
which present none."""


@dataclass(frozen=True)
class BodyLimit:
    """What one path's body may hold: `size` bytes, and at most `values` JSON values (counted as
    `json_values` counts them)."""

    size: int
    values: int


def json_values(body: bytes | bytearray) -> int:
    """An upper bound of the values a JSON body holds, at C speed: every `,`, `:`, `[` and `{`,
    inside strings too (a value is a container's first, or follows one of these)."""
    return body.count(b",") + body.count(b":") + body.count(b"[") + body.count(b"{")


@dataclass(frozen=True)
class ConnectionLimits:
    request_deadline_s: float
    max_body_bytes: int = MAX_BODY_BYTES
    max_head_bytes: int = MAX_HEAD_BYTES
    small_body_bytes: int = SMALL_BODY_BYTES
    large_bodies: int = LARGE_BODIES

    @classmethod
    def for_timeout(cls, webhook_timeout_s: float) -> "ConnectionLimits":
        """Half the API server's webhook timeout: a request that has not arrived by then could not
        be answered in time anyway, and the API server sends its requests in milliseconds."""
        return cls(request_deadline_s=max(webhook_timeout_s / 2, 0.5))


CutObserver = Callable[[str], None]
"""Told the reason each time a connection is cut (a metric counter, in the server)."""
RefusalObserver = Callable[[str, int], None]
"""Told the path and status each time the gateway answers a request itself (413, 503, 403)."""
ClientGate = Callable[[Any], "str | None"]
"""Given a connection's `ssl.SSLObject`, why its caller may not be served (None: it may)."""
GATE_EXTENSION: Final = "fivespot.client_refusal"
"""The ASGI scope extension carrying the connection's refusal from the protocol to the gateway."""


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
    """uvicorn's httptools protocol plus the whole-request deadline, the head-size limit and the
    client-certificate gate's verdict on the connection."""

    limits: ClassVar[ConnectionLimits]
    gate: ClassVar[ClientGate | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The server builds the protocol when it accepts the connection, before the TLS
        # handshake: the first request's deadline counts from here.
        self._deadline: asyncio.TimerHandle | None = self.loop.call_later(
            self.limits.request_deadline_s, self._expire)
        self._expired = False
        self._in_head = True
        self._head_bytes = 0
        self._refusal: str | None = None

    # --- the connection ---

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self._expired:  # the handshake finished only after the deadline
            self.transport.close()
            return
        gate = type(self).gate
        if gate is not None:
            self._refusal = gate(transport.get_extra_info("ssl_object"))

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
        cast(dict[str, Any], self.scope)["extensions"] = {GATE_EXTENSION: self._refusal}
        if self._deadline is None:  # the next request on a kept-alive connection
            self._deadline = self.loop.call_later(self.limits.request_deadline_s, self._expire)

    def on_headers_complete(self) -> None:
        self._in_head = False
        state = self.server_state
        state.default_headers = fresh_date(state.default_headers, time.time())
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
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]
"""A response made whole: status, headers (lower-case names), body."""
DirectAnswer = Callable[[str, str, bytes], "Answer | None"]
"""`(method, path, body)`: the answer to a whole request made without the WSGI app, or None to
leave it to the app."""


@dataclass(frozen=True)
class Served:
    """What a worker serves: the WSGI app, and the requests it answers without it."""

    app: WSGIApp
    direct: DirectAnswer | None = None


class LargeBodies:
    """The slots large bodies hold from their first byte to their answer, and the lock that
    parses them one at a time (see the module docstring)."""

    def __init__(self, slots: int) -> None:
        self.free = slots
        self._parsing: asyncio.Lock | None = None

    def take(self) -> bool:
        if self.free == 0:
            return False
        self.free -= 1
        return True

    def give(self) -> None:
        self.free += 1

    @property
    def parsing(self) -> asyncio.Lock:
        if self._parsing is None:  # made on the worker's loop, at its first use
            self._parsing = asyncio.Lock()
        return self._parsing


class WSGIGateway:
    """The ASGI app the server runs: reads a request's whole body on the event loop (bounded),
    then calls the WSGI app (Flask) right there and sends its answer.

    On the loop, not in a thread pool: what the app does is pure CPU work on in-memory caches
    (no I/O to wait on), so a thread would add only a hand-off each way — measured, the no-op
    responder cost 0.6-1.0 ms of CPU per request inline against 1.4-2.0 ms through a2wsgi's
    thread pool — and a thread would not help a long parse anyway (`json` holds the GIL). No
    client can hold the loop: it reaches the app only with a whole request, and large bodies
    reach it one at a time.
    """

    def __init__(self, app: WSGIApp | Served, limits: ConnectionLimits,
                 body_limit: Callable[[str], BodyLimit] | None = None,
                 on_refused: RefusalObserver | None = None,
                 waits: Callable[[str], bool] | None = None) -> None:
        served = app if isinstance(app, Served) else Served(app)
        self.app, self.direct = served.app, served.direct
        self.limits, self.on_refused = limits, on_refused
        self.body_limit = body_limit or (
            lambda _path: BodyLimit(limits.max_body_bytes, limits.max_body_bytes))
        self.large = LargeBodies(limits.large_bodies)
        self.waits = waits or (lambda _path: False)
        """Whether a path's check may wait on the API server (a read it cannot take from a
        cache): its app call runs on a thread of `waiting`, so the loop keeps serving every
        other review meanwhile."""
        self._waiting: ThreadPoolExecutor | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = str(scope.get("path", ""))
        refusal = (scope.get("extensions") or {}).get(GATE_EXTENSION)
        if refusal is not None and not (scope.get("method") == "GET" and path in PROBE_PATHS):
            peer = scope.get("client")
            log.warning("refused %s %s from %s: %s", scope.get("method"), path,
                        "%s:%d" % tuple(peer) if peer else "an unknown peer", refusal)
            await self._refuse(scope, receive, send, 403, f"{refusal}; this webhook answers only "
                               "callers with an accepted client certificate", drain=False)
            return
        limit = self.body_limit(path)
        limit = BodyLimit(min(limit.size, self.limits.max_body_bytes), limit.values)
        declared = _content_length(scope)
        if declared is not None and declared > limit.size:
            await self._too_large(scope, receive, send, limit.size)
            return
        large = declared is not None and declared > self.limits.small_body_bytes
        if large and not self.large.take():
            await self._busy(scope, receive, send)
            return
        try:
            await self._serve(scope, receive, send, limit, large)
        finally:
            if large:
                self.large.give()

    async def _serve(self, scope: Scope, receive: Receive, send: Send, limit: BodyLimit,
                     large: bool) -> None:
        body = bytearray()
        taken = False  # a slot this call took for a chunked body that grew large
        try:
            more = True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                more = bool(message.get("more_body", False))
                if len(body) > limit.size:
                    await self._too_large(scope, receive, send, limit.size)
                    return
                if not large and len(body) > self.limits.small_body_bytes:
                    if not self.large.take():
                        await self._busy(scope, receive, send)
                        return
                    large = taken = True
            # The whole body is in: what is refused from here on has nothing left to drain.
            if large and json_values(body) > limit.values:
                await self._refuse(scope, receive, send, 413, f"the body holds more than "
                                   f"{limit.values} JSON values (every ',', ':', '[' and '{{' "
                                   "counted); an AdmissionReview for this path never does",
                                   drain=False)
                return
            answer = await self._parse_in_turn(scope, bytes(body)) if large else \
                await self._decide(scope, bytes(body))
        finally:
            if taken:
                self.large.give()
        if answer is None:
            await self._busy(scope, receive, send, drain=False)
            return
        status, headers, payload = answer
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    async def _parse_in_turn(self, scope: Scope, body: bytes
                             ) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        """The app's answer to a large body, once no other large body is being decided; None
        when its turn did not come within the request deadline."""
        try:
            await asyncio.wait_for(self.large.parsing.acquire(), self.limits.request_deadline_s)
        except TimeoutError:
            return None
        try:
            return await self._decide(scope, body)
        finally:
            self.large.parsing.release()

    async def _decide(self, scope: Scope, body: bytes
                      ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """The app's answer: on the loop (pure CPU work), or on a thread of `waiting` when the
        path's check may wait on the API server."""
        if not self.waits(str(scope.get("path", ""))):
            return self._call(scope, body)
        if self._waiting is None:  # made in the worker, after the fork
            self._waiting = ThreadPoolExecutor(WAITING_THREADS, thread_name_prefix="webhook-reads")
        return await asyncio.get_running_loop().run_in_executor(
            self._waiting, self._call_app, scope, body)

    def _call(self, scope: Scope, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        # No cyclic collection while a request is decided: a hostile body makes `json` build
        # millions of lists, and the collector traversing them again and again cost four times
        # the parse itself (7 MiB of `[[[]]],...`: 3.3 s instead of 0.8 s); nothing a request
        # builds is cyclic, and whatever it allocated is freed when it returns.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._call_app(scope, body)
        finally:
            if collecting:
                gc.enable()

    def _call_app(self, scope: Scope, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        if self.direct is not None:
            answer = self.direct(str(scope.get("method", "")), str(scope.get("path", "")), body)
            if answer is not None:
                return answer
        return self._call_wsgi(scope, body)

    def _call_wsgi(self, scope: Scope, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        environ: dict[str, Any] = dict(build_environ(cast(Any, scope), cast(Any, io.BytesIO(body))))
        # The length is known now, whatever the framing was (WSGI reads a body without a
        # Content-Length as empty).
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        started: list[Any] = []
        chunks: list[bytes] = []

        def start_response(status: str, headers: list[tuple[str, str]],
                           exc_info: Any = None) -> Callable[[bytes], None]:
            started[:] = [status, headers]  # nothing is sent before the app returns
            return chunks.append

        result = self.app(environ, start_response)
        try:
            chunks.extend(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        status, headers = started
        return (int(status.split(" ", 1)[0]),
                [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
                b"".join(chunks))

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        await self._refuse(scope, receive, send, 413, f"the body is larger than {limit} bytes; an "
                           "AdmissionReview for this path never is")

    async def _busy(self, scope: Scope, receive: Receive, send: Send, drain: bool = True) -> None:
        await self._refuse(scope, receive, send, 503, f"{self.limits.large_bodies} large bodies "
                           "are being received; retry", drain=drain, retry_after=True)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int, error: str,
                      *, drain: bool = True, retry_after: bool = False) -> None:
        """Answer `status` and close; with `drain`, the rest of the body is read and dropped
        (never buffered) until it ends or the deadline cuts it, so the client reads the answer
        instead of a reset."""
        if self.on_refused is not None:
            self.on_refused(str(scope.get("path", "")), status)
        payload = json.dumps({"error": error}).encode()
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(payload)).encode()), (b"connection", b"close")]
        if retry_after:
            headers.append((b"retry-after", b"1"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload, "more_body": drain})
        if not drain:
            return
        while (message := await receive())["type"] == "http.request" and message.get("more_body"):
            pass
        await send({"type": "http.response.body", "body": b"", "more_body": False})


Headers = list[tuple[bytes, bytes]]


def fresh_date(headers: Headers, now: float) -> Headers:
    """`headers` (uvicorn's defaults: the Date, when it sends one, and the configured ones) with the
    Date of the second `now` is in; the same list when it already says so, or has no Date."""
    date = formatdate(int(now), usegmt=True).encode()
    if not any(name == b"date" and value != date for name, value in headers):
        return headers
    return [(b"date", date) if name == b"date" else (name, value) for name, value in headers]


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


WATCHDOG_TICK_S: Final = 5.0
"""How often an idle master and worker wake: gunicorn's watchdog kills a worker that has not
notified it for its `timeout` (30 s), and a worker notifies at its first tick after half of it,
so a tick of 5 s keeps the notifications 15-20 s apart and a hung worker is found within 35 s."""


class QuietServer(Server):
    """uvicorn's server, ticking every `TICK_S` (5 s) instead of ten times a second. Its tick
    refreshes the Date header (done per request here: `fresh_date`), notifies gunicorn (every
    15 s anyway) and checks whether to exit, which a stop signal now wakes it for at once."""

    TICK_S: ClassVar[float] = WATCHDOG_TICK_S

    async def main_loop(self) -> None:
        woken = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._wake: Callable[[], object] = lambda: loop.call_soon_threadsafe(woken.set)
        counter = 0  # uvicorn's on_tick does its periodic work when counter % 10 == 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            try:
                await asyncio.wait_for(woken.wait(), self.TICK_S)
            except TimeoutError:
                pass
            woken.clear()
            should_exit = await self.on_tick(counter)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        wake = getattr(self, "_wake", None)
        if wake is not None:
            wake()


class QuietArbiter(Arbiter):  # type: ignore[misc]
    """gunicorn's master, waking every `WATCHDOG_TICK_S` instead of every second when no signal
    comes: what it does then is the watchdog (a dead worker's SIGCHLD and a stop wake it at once)."""

    def wait_for_signals(self, timeout: float = 1.0) -> list[signal.Signals]:
        return cast(list[signal.Signals], super().wait_for_signals(timeout=WATCHDOG_TICK_S))


class AdmissionWorker(UvicornWorker):  # type: ignore[misc]
    """gunicorn worker: uvicorn on a `DeadlineLoop` with `DeadlineProtocol`. `configure` makes a
    subclass carrying the limits and the TLS context hook (gunicorn instantiates the class)."""

    limits: ClassVar[ConnectionLimits]

    @classmethod
    def configure(cls, limits: ConnectionLimits, ssl_context_factory: SSLContextFactory | None,
                  gate: ClientGate | None = None) -> type["AdmissionWorker"]:
        protocol = type("AdmissionProtocol", (DeadlineProtocol,),
                        {"limits": limits, "gate": staticmethod(gate) if gate else None})
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

    async def _serve(self) -> None:
        """uvicorn-worker's `_serve`, with the `QuietServer`."""
        self.config.app = self.wsgi
        server = QuietServer(config=self.config)
        self._install_sigquit_handler()
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
