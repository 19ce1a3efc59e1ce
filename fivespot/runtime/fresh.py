"""Reads that must not come from a cache: the one-governor rules under load.

An informer cache lags the API server by a watch event's trip, more on a loaded machine, and each
cache lags on its own: the provider's event that opens a schedule can arrive before the
ScheduledMachine event that took the node a moment earlier. A decision that would give a host or
a field away is therefore re-checked on a list served by the API server now — a consistent read
(no resourceVersion: quorum, or the watch cache once it has caught up with etcd), whose
`metadata.resourceVersion` is the etcd revision it reflects. Everything committed before that
revision is in the answer; the caller logs the revision with its write, so a test (or a person
reading the log) can order the decision against every other write.

Used by the capacity controller (ScheduledMachines before the active value goes out) and meant
for any controller that takes a host or a field (the ScheduledMachine controller).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fivespot.runtime import kube
from fivespot.runtime.kube import ApiClient


@dataclass(frozen=True)
class FreshList:
    """The objects of one kind in one namespace, as of etcd revision `resource_version`."""

    items: tuple[Mapping[str, Any], ...]
    resource_version: str | None


def fresh_list(api: ApiClient, group: str, version: str, plural: str, namespace: str, *,
               timeout: float | tuple[float, float] | None = kube.DEFAULT_TIMEOUT) -> FreshList:
    """A consistent list from the API server (never a cache); raises kube.ApiError."""
    path = kube.resource_path(group, version, plural, namespace)
    answer = kube.request(api, "GET", path, timeout=timeout)
    items = tuple(i for i in answer.get("items") or () if isinstance(i, Mapping))
    meta = answer.get("metadata")
    revision = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return FreshList(items, str(revision) if revision else None)
