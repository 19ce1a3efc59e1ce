"""A controller's own writes, as the API server answered them, until its watch catches up.

A controller that writes an object it also watches has two copies of it for a moment: the
informer cache (a watch event's trip behind) and the answer to its own write. Two rules follow,
kept here once for every controller:

- **Decide on the newer of the two** (`current`). A decision made on the cached copy alone can be
  wrong in a way nothing would correct: the status it reads lacks the write it just made (so it
  would redo it, or compute a transition time twice), or a target reads the value from before our
  write. resourceVersions are etcd revisions, so "newer" is a comparison of numbers.
- **An event that is exactly our write coming back needs no reconcile** (`observe`). Its
  resourceVersion is the one our write answered with, so it is the object the reconcile computed
  from plus what it wrote; that reconcile already asked for its requeue. At a market open, when
  every schedule flips in the same second, this halves the reconciles. Anything else — another
  writer, a spec edit, a resync of a version we never wrote — is new.

The answer can arrive after the event (the watch is another connection): while a write is in
flight (`begin` .. `landed`) its key's events are held, and `landed` says whether any of them
was not the write's own, so the caller queues the key and nothing is lost whichever came first.
A write may carry a `tag` (the capacity controller marks an active-value write of a target, whose
echo needs nothing, apart from a zero write, whose echo completes a handback).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from fivespot.runtime.cache import Obj


class Seen(Enum):
    NEW = "new"
    """Not our write: reconcile what it concerns."""
    OWN = "own"
    """Exactly our last write of the key coming back."""
    HELD = "held"
    """A write of the key is in flight; `landed` decides whether this event mattered."""


@dataclass(frozen=True)
class Observed:
    seen: Seen
    tag: str = ""
    """The tag of our write, for Seen.OWN."""


@dataclass(frozen=True)
class _Write:
    obj: Obj
    tag: str


def revision(obj: Obj | None) -> int | None:
    """The object's resourceVersion as a number (an etcd revision), or None."""
    meta = obj.get("metadata") if obj is not None else None
    raw = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    try:
        return int(raw) if raw is not None else None
    except (TypeError, ValueError):
        return None


def newer(a: Obj | None, b: Obj | None) -> Obj | None:
    """The more recent of two versions of one object, by resourceVersion; `b` on a tie."""
    if a is None or b is None:
        return a or b
    ra, rb = revision(a), revision(b)
    if ra is None or rb is None:
        return b
    return b if rb >= ra else a


class OwnWrites:
    """Per key: our last write's answer until the watch delivers that version or a newer one, and
    the versions of events seen while a write of the key is in flight. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, _Write] = {}
        self._in_flight: dict[str, set[int]] = {}

    def begin(self, key: str) -> None:
        """A write of `key` is about to be sent."""
        with self._lock:
            self._in_flight[key] = set()

    def landed(self, key: str, answer: Obj | None, tag: str = "") -> bool:
        """The write of `key` answered with `answer` (None: it failed). True when an event other
        than the write's own arrived meanwhile: queue the key."""
        version = revision(answer)
        with self._lock:
            seen = self._in_flight.pop(key, set())
            if answer is not None and version is not None:
                if version in seen:
                    seen.discard(version)
                else:
                    self._last[key] = _Write(answer, tag)
            return bool(seen)

    def observe(self, key: str, obj: Obj | None, *, deleted: bool = False) -> Observed:
        """A watch event of `key`: whether it is our own write coming back. The stored write is
        dropped once the watch has delivered it or anything newer (the cache has caught up), or
        the object is gone."""
        version = revision(obj)
        with self._lock:
            if deleted:
                self._last.pop(key, None)
                return Observed(Seen.NEW)
            flight = self._in_flight.get(key)
            if flight is not None and version is not None:
                flight.add(version)
                return Observed(Seen.HELD)
            own = self._last.get(key)
            if own is None or version is None:
                return Observed(Seen.NEW)
            mine = revision(own.obj)
            if mine is not None and version >= mine:
                del self._last[key]
                if version == mine:
                    return Observed(Seen.OWN, own.tag)
            return Observed(Seen.NEW)

    def current(self, key: str, cached: Obj | None) -> Obj | None:
        """What to decide on: the cached copy, or our last write of it when the cache has not
        caught up with that yet. With no cached copy (not in the cache yet, or deleted) our write
        is not evidence the object exists, so None stays None."""
        if cached is None:
            return None
        with self._lock:
            own = self._last.get(key)
        return newer(cached, own.obj) if own is not None else cached

    def known(self, key: str, cached: Obj | None) -> Obj | None:
        """Like `current`, but our write stands in for a cache that has not seen the object at
        all yet (a target we just wrote, before its informer delivered it)."""
        with self._lock:
            own = self._last.get(key)
        if own is None:
            return cached
        return newer(cached, own.obj) if cached is not None else own.obj
