"""A small in-memory API server for unit tests of the runtime and of a controller's shell: put in
place of `fivespot.runtime.kube.request`, it keeps objects by path with one revision counter, applies
merge patches, replaces on PUT, honours the preconditions the conditional writer sends (a patch's
`metadata.resourceVersion`, a delete's uid and resourceVersion: 409 on a mismatch), answers a
create of what exists with AlreadyExists, and records every call. Integration tests use the real
API server; this is for what a unit test must hold still (an event held back, a write that lands
late).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from fivespot.runtime import kube


def merge(into: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """RFC 7386: null removes, objects merge, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


class FakeApiServer:
    """Objects by path, one revision counter, writes applied and recorded."""

    def __init__(self, collections: tuple[str, ...] = ()) -> None:
        self.collections = collections
        """Paths listed on GET (their items are the objects stored under them)."""
        self.revision = 100
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.sent: list[dict[str, Any]] = []
        """Every request as sent: method, path, and the keyword arguments (body, query, ...)."""
        self.patched: list[tuple[str, dict[str, Any]]] = []
        """(path, the object as the patch left it), in order."""

    def put(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store `obj` at `path` as a new revision; its copy as served."""
        self.revision += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.revision)
        self.objects[path] = obj
        return copy.deepcopy(obj)

    def request(self, api: object, method: str, path: str, *, body: Any = None,
                **kwargs: Any) -> dict[str, Any]:
        self.calls.append((method, path))
        self.sent.append({"method": method, "path": path, "body": copy.deepcopy(body), **kwargs})
        if method == "GET":
            return self._get(path)
        if method == "POST":
            return self._create(path, body)
        if method == "PATCH":
            return self._patch(path, body)
        if method == "PUT":
            return self._replace(path, body)
        if method == "DELETE":
            return self._delete(path, body)
        raise kube.ApiError(405, "MethodNotAllowed", f"{method} {path}")

    def _get(self, path: str) -> dict[str, Any]:
        if path in self.objects:
            return copy.deepcopy(self.objects[path])
        if path in self.collections:
            items = [copy.deepcopy(o) for p, o in self.objects.items()
                     if p.startswith(path + "/") and "/" not in p[len(path) + 1:]]
            return {"items": items, "metadata": {"resourceVersion": str(self.revision)}}
        raise kube.ApiError(404, "NotFound", f"GET {path}")

    def _create(self, path: str, body: Any) -> dict[str, Any]:
        if path.endswith("/events"):
            return dict(body)
        name = (body.get("metadata") or {}).get("name")
        target = f"{path}/{name}"
        if target in self.objects:
            raise kube.ApiError(409, "AlreadyExists", f"{target} already exists")
        return self.put(target, body)

    def _patch(self, path: str, body: Any) -> dict[str, Any]:
        base = path.removesuffix("/status")
        if base not in self.objects:
            raise kube.ApiError(404, "NotFound", path)
        self._precondition(base, (body.get("metadata") or {}).get("resourceVersion"))
        updated = copy.deepcopy(self.objects[base])
        merge(updated, {k: v for k, v in body.items() if k != "metadata"})
        stored = self.put(base, updated)
        self.patched.append((base, copy.deepcopy(stored)))
        return stored

    def _replace(self, path: str, body: Any) -> dict[str, Any]:
        """An update: the whole object, conditional on its resourceVersion when it carries one."""
        if path not in self.objects:
            raise kube.ApiError(404, "NotFound", path)
        self._precondition(path, (body.get("metadata") or {}).get("resourceVersion"))
        return self.put(path, body)

    def _delete(self, path: str, body: Any) -> dict[str, Any]:
        if path not in self.objects:
            raise kube.ApiError(404, "NotFound", path)
        wanted = (body or {}).get("preconditions") or {}
        meta = self.objects[path]["metadata"]
        if "uid" in wanted and wanted["uid"] != meta.get("uid"):
            raise kube.ApiError(409, "Conflict", f"{path}: uid precondition failed")
        self._precondition(path, wanted.get("resourceVersion"))
        return self.objects.pop(path)

    def _precondition(self, path: str, version: object) -> None:
        if version is not None and version != self.objects[path]["metadata"]["resourceVersion"]:
            raise kube.ApiError(409, "Conflict", f"{path}: the object has been modified")
