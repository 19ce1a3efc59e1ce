"""An informer: list, then watch from the list's resourceVersion, into a local cache that handlers
and reconcilers read instead of the API server.

What it does about the ways watches fail (kopf's long-standing issue is watches that silently
stop delivering; client-go's reflector is the model here):

- the resourceVersion is kept across reconnects, so a closed watch resumes without a relist;
  `410 Gone` (the version has been compacted away) relists and turns the difference into
  ADDED/MODIFIED/DELETED notifications, so no change is lost and none is replayed;
- bookmarks are requested (`allowWatchBookmarks`), so even a quiet resource shows the watch is
  alive and keeps the resourceVersion fresh;
- every watch carries a server-side `timeoutSeconds` (jittered, so replicas do not reconnect in
  lockstep) and a socket read timeout of `stall_after_s`: a connection that dies without a FIN
  is noticed rather than waited on forever;
- a stall (no event and no bookmark for `stall_after_s` since the watch was answered) is counted,
  logged, makes `healthy()` false (readiness fails) until the restarted watch delivers an event
  or a bookmark, and restarts the watch;
- reconnects back off exponentially with jitter;
- a list or watch answered `404 Not Found` (the resource is no longer served: its CRD was deleted,
  or the version it watches was removed) is reported to `add_not_found_handler` callbacks, so the
  owner can re-resolve the kind; the informer itself keeps retrying until it is stopped.

A slow periodic resync re-delivers every cached object as RESYNC: the second clock, a backstop
for anything an event-driven reaction missed (decision 0040: once an hour by default, each period
drawn between 1 and 1.25 times it, as controller-runtime's SyncPeriod is, so a process's informers
and a Deployment's replicas do not resync in lockstep).
"""

from __future__ import annotations

import builtins

import json
import logging
import random
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubernetes import client

from fivespot.runtime import kube, metrics
from fivespot.runtime.cache import (
    ADDED,
    DELETED,
    MODIFIED,
    RESYNC,
    Cache,
    Delta,
    IndexFunc,
    Obj,
    resource_version,
)
from fivespot.runtime.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("fivespot.informer")

EventHandler = Callable[[str, Obj, Obj | None], None]
"""`handler(event_type, obj, old)`: ADDED, MODIFIED, DELETED or RESYNC; `old` is None on ADDED."""

DEFAULT_STALL_AFTER_S: Final = 150.0
"""The API server sends a bookmark about once a minute on a quiet watch; two missed plus slack."""
DEFAULT_WATCH_TIMEOUT_S: Final = 480.0
"""8 to 10 minutes with the jitter (client-go's reflector: 5 to 10): each restart is a request,
and a quiet watch is proven alive by its bookmarks, not by restarting it."""
PAGE_SIZE: Final = 500
DEFAULT_RESYNC_S: Final = 3600.0
"""The backstop's period (decision 0040). A resync re-drives what the cache already holds, so it
repairs a missed reaction, never a stale cache; every decision that depends on time is requeued
at its own deadline. At 1,000 targets one resync of the capacity controller costs about half a
CPU second, which every 5 minutes was most of fivespot's idle CPU."""
RESYNC_JITTER: Final = 0.25


class _Gone(Exception):
    """The kept resourceVersion is too old: relist."""


class _Stalled(Exception):
    """No event and no bookmark for the stall threshold."""


@dataclass(frozen=True)
class WatchStep:
    """What one decoded watch event means for the informer."""

    delta: Delta | None = None
    resource_version: str | None = None
    gone: bool = False
    error: str | None = None


def handle_watch_event(cache: Cache, event: Mapping[str, Any]) -> WatchStep:
    """Apply one watch event to `cache`: the notification, the new resourceVersion, or an error."""
    kind = event.get("type")
    obj = event.get("object")
    if not isinstance(obj, dict):
        return WatchStep(error=f"watch event without an object: {str(event)[:200]}")
    if kind == "ERROR":
        code = obj.get("code")
        if code == 410 or obj.get("reason") in ("Expired", "Gone"):
            return WatchStep(gone=True)
        return WatchStep(error=f"watch error {code}: {obj.get('message')}")
    if kind == "BOOKMARK":
        return WatchStep(resource_version=resource_version(obj))
    if kind not in (ADDED, MODIFIED, DELETED):
        return WatchStep(error=f"unknown watch event type {kind!r}")
    return WatchStep(delta=cache.apply(str(kind), obj), resource_version=resource_version(obj))


RECONNECT_MAX_S = 4.0
"""The longest wait between two attempts to list or watch. A restarted API server is back to a
watch within this (plus the jitter below it): a controller must be right again within the lease
duration + 5 s of the server answering (docs/design/numbers.md), so the backoff cannot grow to client-go's
30 s; a handful of watches per process retrying every 4 s is no load on a recovering server."""


def reconnect_delay(attempt: int, rng: random.Random, base_s: float = 0.5,
                    max_s: float = RECONNECT_MAX_S) -> float:
    """Jittered exponential backoff: between half and all of base * 2**attempt, capped."""
    ceiling = min(max_s, base_s * 2.0 ** min(attempt, 30))
    return float(ceiling * rng.uniform(0.5, 1.0))


def resync_delay(period_s: float, rng: random.Random) -> float:
    """The wait before the next resync: between the period and (1 + RESYNC_JITTER) times it."""
    return float(period_s * (1.0 + RESYNC_JITTER * rng.random()))


def is_stalled(last_activity: float, now: float, stall_after_s: float) -> bool:
    return now - last_activity > stall_after_s


def iter_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Complete newline-terminated lines from a byte stream cut at arbitrary points."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


class Informer:
    """A watch-fed cache of one resource (custom or core: group "" is the core group)."""

    def __init__(
        self,
        api_client: client.ApiClient,
        group: str,
        version: str,
        plural: str,
        namespace: str | None = None,
        *,
        resync_s: float = DEFAULT_RESYNC_S,
        stall_after_s: float = DEFAULT_STALL_AFTER_S,
        watch_timeout_s: float = DEFAULT_WATCH_TIMEOUT_S,
        page_size: int = PAGE_SIZE,
        clock: Clock = SYSTEM_CLOCK,
        field_selector: str | None = None,
    ):
        """`field_selector` narrows the list and the watch (`metadata.name=x`: one object, which
        RBAC authorizes by resourceNames)."""
        self.api_client = api_client
        self.group, self.version, self.plural, self.namespace = group, version, plural, namespace
        self.resync_s = resync_s
        self.stall_after_s = stall_after_s
        self.watch_timeout_s = watch_timeout_s
        self.page_size = page_size
        self.name = f"{plural}.{group}" if group else plural
        self.field_selector = field_selector
        if field_selector:
            self.name = f"{self.name}[{field_selector}]"
        self._clock = clock
        self._cache = Cache()
        self._handlers: builtins.list[EventHandler] = []
        self._not_found_handlers: builtins.list[Callable[[], None]] = []
        self._handlers_lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._threads: builtins.list[threading.Thread] = []
        self._response: Any = None
        self._response_lock = threading.Lock()
        self._rv: str | None = None
        self._stalled = False
        self._rng = random.Random()
        self.last_activity: float = clock.monotonic()
        self._healthy = metrics.WATCH_HEALTHY.labels(resource=self.name)
        self._healthy.set(0)

    # --- public API -----------------------------------------------------------------------------

    def add_handler(self, callback: EventHandler) -> None:
        """Call `callback(event_type, obj, old)` for every change (and RESYNC). Add before start
        to see the initial list as ADDED events; handlers run on the watch thread, keep them short
        (enqueue a key)."""
        with self._handlers_lock:
            self._handlers.append(callback)

    def add_not_found_handler(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (on the watch thread; keep it short) whenever a list or watch is
        answered 404: the resource is not served any more."""
        with self._handlers_lock:
            self._not_found_handlers.append(callback)

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Keep a secondary index: `by_index(name, value)` returns objects `func` maps to value."""
        self._cache.add_index(name, func)

    def by_index(self, name: str, value: str) -> builtins.list[Obj]:
        return self._cache.by_index(name, value)

    def start(self) -> None:
        """Start the list/watch thread (and the resync thread); returns at once."""
        if self._threads:
            return
        self._threads = [threading.Thread(target=self._run, name=f"informer-{self.name}", daemon=True)]
        if self.resync_s > 0:
            self._threads.append(
                threading.Thread(target=self._resync_loop, name=f"resync-{self.name}", daemon=True)
            )
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._interrupt()
        for thread in self._threads:
            thread.join(timeout)
        self._healthy.set(0)

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def get(self, namespace: str | None, name: str) -> Obj | None:
        """The cached object (do not mutate it), or None."""
        return self._cache.get(f"{namespace}/{name}" if namespace else name)

    def list(self, namespace: str | None = None) -> builtins.list[Obj]:
        """Cached objects, all or in one namespace (do not mutate them)."""
        return self._cache.list(namespace)

    def healthy(self) -> bool:
        """Synced, and the watch has shown life (event, bookmark or list) within the threshold."""
        ok = (
            self.has_synced()
            and not self._stalled
            and not is_stalled(self.last_activity, self._clock.monotonic(), self.stall_after_s)
        )
        self._healthy.set(1 if ok else 0)
        return ok

    @property
    def resource_version(self) -> str | None:
        return self._rv

    # --- the loop -------------------------------------------------------------------------------

    def _path(self) -> str:
        return kube.resource_path(self.group, self.version, self.plural, self.namespace)

    def _run(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            try:
                if self._rv is None:
                    self._relist()
                self._watch()
                attempt = 0
                metrics.WATCH_RESTARTS.labels(resource=self.name, reason="closed").inc()
            except _Gone:
                if self._stop.is_set():
                    break
                log.info("watch resourceVersion expired; relisting", extra={"resource": self.name})
                metrics.WATCH_RESTARTS.labels(resource=self.name, reason="gone").inc()
                self._rv = None
            except _Stalled:
                if self._stop.is_set():
                    break
                self._stalled = True
                metrics.WATCH_STALLS.labels(resource=self.name).inc()
                metrics.WATCH_RESTARTS.labels(resource=self.name, reason="stall").inc()
                log.warning(
                    "watch stalled: no event and no bookmark; restarting it",
                    extra={"resource": self.name, "stall_after_s": self.stall_after_s},
                )
            except Exception as error:  # API errors, connection resets, decoding
                if self._stop.is_set():
                    break
                if isinstance(error, kube.ApiError) and error.not_found:
                    self._report_not_found()
                delay = reconnect_delay(attempt, self._rng)
                attempt += 1
                metrics.WATCH_RESTARTS.labels(resource=self.name, reason="error").inc()
                log.warning(
                    "list/watch failed; retrying",
                    extra={"resource": self.name, "error": str(error)[:500], "retry_in_s": round(delay, 2)},
                )
                self._stop.wait(delay)

    def _relist(self) -> None:
        items: builtins.list[Obj] = []
        token: str | None = None
        list_rv = ""
        kind = ""
        while True:
            answer = kube.request(
                self.api_client, "GET", self._path(),
                query={"limit": self.page_size, "continue": token,
                       "fieldSelector": self.field_selector},
                timeout=(5.0, 60.0),
            )
            items += [i for i in answer.get("items") or [] if isinstance(i, dict)]
            meta = answer.get("metadata") or {}
            list_rv = list_rv or str(meta.get("resourceVersion") or "")
            kind = kind or str(answer.get("kind") or "").removesuffix("List")
            token = meta.get("continue") or None
            if token is None:
                break
        for item in items:  # list items omit apiVersion/kind; handlers expect whole objects
            item.setdefault("apiVersion", f"{self.group}/{self.version}" if self.group else self.version)
            item.setdefault("kind", kind)
        self._dispatch(self._cache.replace(items))
        self._rv = list_rv
        self._touch()
        if not self._synced.is_set():
            log.info("cache synced", extra={"resource": self.name, "objects": len(items)})
        self._synced.set()

    def _watch(self) -> None:
        timeout_s = int(self.watch_timeout_s * self._rng.uniform(1.0, 1.25))
        query = {
            "watch": "true",
            "resourceVersion": self._rv,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": max(timeout_s, 1),
            "fieldSelector": self.field_selector,
        }
        try:
            response = kube.stream(self.api_client, self._path(), query=query,
                                   timeout=(5.0, self.stall_after_s))
        except kube.ApiError as error:
            if error.gone:
                raise _Gone() from error
            raise
        with self._response_lock:
            self._response = response.response
        self._touch(proof=False)  # the server answered: silence is measured from here
        try:
            for line in iter_lines(self._chunks(response.response)):
                if self._stop.is_set():
                    return
                step = handle_watch_event(self._cache, json.loads(line))
                if step.gone:
                    raise _Gone()
                if step.error is not None:
                    raise RuntimeError(step.error)
                if step.resource_version:
                    self._rv = step.resource_version
                self._touch()
                if step.delta is not None:
                    self._dispatch([step.delta])
        finally:
            with self._response_lock:
                self._response = None
            response.response.release_conn()

    def _chunks(self, raw: Any) -> Iterator[bytes]:
        import urllib3.exceptions

        try:
            yield from raw.stream(None, decode_content=True)
        except urllib3.exceptions.ReadTimeoutError as error:
            raise _Stalled() from error
        except urllib3.exceptions.ProtocolError as error:
            if "timed out" in str(error).lower():
                raise _Stalled() from error
            raise

    def _interrupt(self) -> None:
        with self._response_lock:
            response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception:  # already closed
                pass

    def _touch(self, proof: bool = True) -> None:
        """Record life. After a stall only an event, bookmark or list proves the new watch works
        (a connection that answers can still go silent), so only those clear the stall."""
        self.last_activity = self._clock.monotonic()
        if proof and self._stalled:
            log.info("watch recovered", extra={"resource": self.name})
            self._stalled = False

    def _dispatch(self, deltas: builtins.list[Delta]) -> None:
        with self._handlers_lock:
            handlers = list(self._handlers)
        for delta in deltas:
            for handler in handlers:
                try:
                    handler(delta.type, delta.obj, delta.old)
                except Exception:
                    log.exception("event handler failed", extra={"resource": self.name})

    def _report_not_found(self) -> None:
        with self._handlers_lock:
            handlers = list(self._not_found_handlers)
        for handler in handlers:
            try:
                handler()
            except Exception:
                log.exception("not-found handler failed", extra={"resource": self.name})

    def _resync_loop(self) -> None:
        while not self._stop.wait(resync_delay(self.resync_s, self._rng)):
            if self.has_synced():
                self._dispatch([Delta(RESYNC, o, o) for o in self._cache.list()])
