"""Which watch events are only a controller's own writes coming back.

A controller that writes an object it also watches gets one watch event per write: the object
exactly as its own write left it. Reconciling that event costs a worker and a decision and
finds nothing to do (the reconcile that wrote already asked for its requeue), which at a market
open — every schedule flipping in the same second — doubles the work. A write's answer carries
the new `resourceVersion`; an event with that version is the object as the write made it, so it
needs no reconcile. Anything else (another writer, a spec edit, a resync) is reconciled.

The answer can arrive after the event (the watch is another connection): while a write is in
flight its key's MODIFIED events are held, and when the answer comes those that were not the
write's own are handed back to be queued, so none is lost and the outcome never depends on
which arrived first.
"""

from __future__ import annotations

import threading


class OwnWrites:
    """Per key: the resourceVersion of our last write until its event arrives, and the versions
    of events seen while a write of the key is in flight. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, str] = {}
        self._in_flight: dict[str, set[str]] = {}

    def begin(self, key: str) -> None:
        """A write of `key` is about to be sent."""
        with self._lock:
            self._in_flight[key] = set()

    def landed(self, key: str, version: str | None) -> bool:
        """The write of `key` answered with `version` (None: it failed, or the answer carried
        none). True when an event other than the write's own arrived meanwhile: queue the key."""
        with self._lock:
            seen = self._in_flight.pop(key, set())
            if version is not None:
                if version in seen:
                    seen.discard(version)
                else:
                    self._last[key] = version
            return bool(seen)

    def is_echo(self, key: str, version: object) -> bool:
        """For a MODIFIED event of `key` at `version`: True when it needs no reconcile now —
        it is our last write of `key` coming back (forgotten then, so a later resync of the same
        version is reconciled), or a write of `key` is in flight (`landed` decides)."""
        if not isinstance(version, str):
            return False
        with self._lock:
            seen = self._in_flight.get(key)
            if seen is not None:
                seen.add(version)
                return True
            if self._last.get(key) == version:
                del self._last[key]
                return True
            return False

    def forget(self, key: str) -> None:
        """`key` was deleted."""
        with self._lock:
            self._last.pop(key, None)

