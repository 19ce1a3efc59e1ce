"""The informer's local store, as pure bookkeeping: what an event or a relist does to the cache,
and which handler notifications it implies.

Kept apart from the watch loop so the rules that decide what handlers see (a relist after 410
Gone turns into ADDED/MODIFIED/DELETED for exactly what changed; a repeated resourceVersion is
not news) are tested without a server. Objects are stored without `metadata.managedFields`,
which is most of an object's size and nothing a controller reads.
"""

from __future__ import annotations

import builtins

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fivespot.runtime.kube import object_key

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
RESYNC: Final = "RESYNC"
"""Periodic re-delivery of a cached object (old is the same object): the slow backstop clock."""

Obj = dict[str, Any]
IndexFunc = Callable[[Obj], Iterable[str]]


@dataclass(frozen=True)
class Delta:
    """One notification for the handlers: event type, the object now, the object before."""

    type: str
    obj: Obj
    old: Obj | None


def strip(obj: Obj) -> Obj:
    """The object as cached: without managedFields."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        meta = {k: v for k, v in meta.items() if k != "managedFields"}
        return {**obj, "metadata": meta}
    return obj


def resource_version(obj: Mapping[str, Any]) -> str | None:
    meta = obj.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return str(rv) if rv is not None else None


class Cache:
    """Thread-safe map of key -> object, with optional secondary indexes."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._items: dict[str, Obj] = {}
        self._index_funcs: dict[str, IndexFunc] = {}
        self._indexes: dict[str, dict[str, set[str]]] = {}

    # --- reading --------------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._items.get(key)

    def list(self, namespace: str | None = None) -> builtins.list[Obj]:
        with self._lock:
            if namespace is None:
                return list(self._items.values())
            prefix = f"{namespace}/"
            return [o for k, o in self._items.items() if k.startswith(prefix)]

    def keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Index every object (present and future) under the values `func` returns."""
        with self._lock:
            self._index_funcs[name] = func
            index: dict[str, set[str]] = {}
            for key, obj in self._items.items():
                for value in func(obj):
                    index.setdefault(value, set()).add(key)
            self._indexes[name] = index

    def by_index(self, name: str, value: str) -> builtins.list[Obj]:
        with self._lock:
            keys = self._indexes[name].get(value, set())
            return [self._items[k] for k in sorted(keys)]

    # --- changing -------------------------------------------------------------------------------

    def apply(self, event_type: str, obj: Obj) -> Delta | None:
        """Apply one watch event; the handler notification, or None when nothing changed."""
        obj = strip(obj)
        key = object_key(obj)
        with self._lock:
            old = self._items.get(key)
            if event_type == DELETED:
                if old is None:
                    return None
                self._remove(key, old)
                return Delta(DELETED, obj, old)
            if old is not None and resource_version(old) == resource_version(obj):
                return None
            self._put(key, obj, old)
            return Delta(ADDED if old is None else MODIFIED, obj, old)

    def replace(self, objs: Iterable[Obj]) -> builtins.list[Delta]:
        """Make the cache exactly `objs` (a relist); notifications for what differed."""
        fresh = {object_key(o): o for o in (strip(o) for o in objs)}
        deltas: builtins.list[Delta] = []
        with self._lock:
            for key in [k for k in self._items if k not in fresh]:
                gone = self._items[key]
                self._remove(key, gone)
                deltas.append(Delta(DELETED, gone, gone))
            for key, obj in fresh.items():
                old = self._items.get(key)
                if old is not None and resource_version(old) == resource_version(obj):
                    continue
                self._put(key, obj, old)
                deltas.append(Delta(ADDED if old is None else MODIFIED, obj, old))
        return deltas

    def _put(self, key: str, obj: Obj, old: Obj | None) -> None:
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        for name, func in self._index_funcs.items():
            for value in func(obj):
                self._indexes[name].setdefault(value, set()).add(key)

    def _remove(self, key: str, old: Obj) -> None:
        self._unindex(key, old)
        del self._items[key]

    def _unindex(self, key: str, old: Obj) -> None:
        for name, func in self._index_funcs.items():
            index = self._indexes[name]
            for value in func(old):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
