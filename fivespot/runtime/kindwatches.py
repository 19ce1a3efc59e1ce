"""Watches on kinds a controller does not own, named by group + kind (providers, targets).

Each kind is resolved through discovery, in whatever version the API server serves (provider
contract: never a pinned version). A kind whose CRD is not installed is *unresolved*: the
controller reports it on the objects that use it (ProviderCRDNotInstalled) and the resolver
retries in the background (after `retry_s`, doubling up to `max_retry_s`: a kind that stays
uninstalled, such as KEDA's ScaledObject in a cluster without KEDA, costs one discovery request a
minute, not one every few seconds), so installing the CRD later starts its informer and re-queues
exactly the objects that were waiting for it.

A kind can also stop being served while it is watched: its CRD deleted, or the version being
watched removed from it. The informer's list or watch is then answered 404; the resolver looks
the kind up again and, if discovery no longer serves it as watched, drops that informer: the kind
is unresolved again (or watched in its new version) and the objects that use it are re-queued,
so they report the missing CRD rather than a missing object. Until the resolver has confirmed it
(about a second after the CRD is gone), the kind reads as served and empty: the API server
deletes a CRD's objects before the CRD itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from fivespot.runtime import kube
from fivespot.runtime.informer import EventHandler, Informer
from fivespot.runtime.kube import ApiClient, ResolvedKind

log = logging.getLogger("fivespot.capacity.watches")

GroupKind = tuple[str, str]

NOT_SERVED = "not served by the API server"
"""`Watched.last_error` of a kind discovery does not list: its CRD is not installed."""


@dataclass
class Watched:
    """One kind: its resolution (None while unresolved) and its informer once resolved."""

    group: str
    kind: str
    resolved: ResolvedKind | None = None
    informer: Informer | None = None
    last_error: str | None = None
    suspect: bool = False
    """The informer was answered 404: the resolver checks whether the kind is still served."""
    retry_at: float = 0.0
    """While unresolved: when (monotonic) the resolver's loop looks it up again."""
    retry_delay: float = 0.0


InformerFactory = Callable[[ResolvedKind], Informer]
Changed = Callable[[GroupKind], None]


class KindWatches:
    """Informers for a set of (group, kind), started as each kind becomes resolvable."""

    def __init__(
        self,
        api_client: ApiClient,
        make_informer: InformerFactory,
        handler: EventHandler,
        *,
        retry_s: float = 5.0,
        max_retry_s: float = 60.0,
        on_change: Changed | None = None,
    ):
        """`on_change(group_kind)` runs on the resolver thread whenever a kind's resolution
        changes: it became served (its informer has synced) or stopped being served (its
        informer was dropped). Controllers re-queue the objects that use the kind."""
        self.api_client = api_client
        self._make = make_informer
        self._handler = handler
        self._retry_s = retry_s
        self._max_retry_s = max(max_retry_s, retry_s)
        self._on_change = on_change
        self._lock = threading.Lock()
        self._kinds: dict[GroupKind, Watched] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def want(self, group: str, kind: str) -> None:
        """Watch this kind (idempotent); resolution happens on the resolver thread."""
        with self._lock:
            if (group, kind) in self._kinds:
                return
            self._kinds[(group, kind)] = Watched(group, kind)
        self._wake.set()

    def get(self, group: str, kind: str) -> Watched | None:
        with self._lock:
            return self._kinds.get((group, kind))

    def informers(self) -> list[Informer]:
        with self._lock:
            return [w.informer for w in self._kinds.values() if w.informer is not None]

    def resolve_now(self, due_only: bool = False) -> float | None:
        """One resolution pass over every unresolved or suspect kind (with `due_only`, the
        resolver thread's: only those whose retry is due). Returns when the next retry is due
        (monotonic), or None when nothing is pending."""
        now = time.monotonic()
        with self._lock:
            pending = [w for w in self._kinds.values() if w.resolved is None or w.suspect]
        for watched in pending:
            if due_only and not watched.suspect and now < watched.retry_at:
                continue
            try:
                resolved = kube.resolve_kind(self.api_client, watched.group, watched.kind)
            except kube.ApiError as error:
                watched.last_error = error.message
                log.warning("discovery failed", extra={"group": watched.group, "kind": watched.kind,
                                                       "error": error.message[:300]})
                self._back_off(watched)
                continue
            dropped = False
            if watched.informer is not None:
                with self._lock:
                    watched.suspect = False
                if resolved == watched.resolved:
                    continue  # still served as watched (a brief 404); the informer retries
                self._drop(watched)
                dropped = True
            if resolved is None:
                watched.last_error = NOT_SERVED
                self._back_off(watched)
                if dropped:
                    self._changed(watched)
                continue
            watched.retry_delay = 0.0
            self._watch(watched, resolved)
        with self._lock:
            waiting = [w.retry_at for w in self._kinds.values() if w.resolved is None or w.suspect]
        return min(waiting) if waiting else None

    def _back_off(self, watched: Watched) -> None:
        watched.retry_delay = min(max(2 * watched.retry_delay, self._retry_s), self._max_retry_s)
        watched.retry_at = time.monotonic() + watched.retry_delay

    def _watch(self, watched: Watched, resolved: ResolvedKind) -> None:
        informer = self._make(resolved)
        informer.add_handler(self._handler)
        informer.add_not_found_handler(lambda: self._suspect(watched))
        with self._lock:
            watched.resolved, watched.informer, watched.last_error = resolved, informer, None
        informer.start()
        log.info("watching kind", extra={"group": resolved.group, "kind": resolved.kind,
                                          "version": resolved.version, "plural": resolved.plural})
        if self._on_change is not None:
            informer.wait_synced(10)
            self._changed(watched)

    def _drop(self, watched: Watched) -> None:
        with self._lock:
            informer, resolved = watched.informer, watched.resolved
            watched.informer, watched.resolved = None, None
        log.warning("kind no longer served as watched; dropping its watch",
                    extra={"group": watched.group, "kind": watched.kind,
                           "version": resolved.version if resolved else None})
        if informer is not None:
            informer.stop()

    def _suspect(self, watched: Watched) -> None:
        with self._lock:
            if watched.informer is None:
                return
            watched.suspect = True
        self._wake.set()

    def _changed(self, watched: Watched) -> None:
        if self._on_change is not None:
            try:
                self._on_change((watched.group, watched.kind))
            except Exception:
                log.exception("kind change handler failed",
                              extra={"group": watched.group, "kind": watched.kind})

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kind-resolver", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for informer in self.informers():
            informer.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            due = self.resolve_now(due_only=True)
            self._wake.wait(None if due is None else max(due - time.monotonic(), 0.05))
            self._wake.clear()
