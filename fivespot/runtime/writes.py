"""The one conditional writer: every write a controller makes goes out through `Writes`.

Decision record 0011: a write decided on an older view of an object — above all one sent by a
replica that has since lost its Lease, which a paused API server may commit many seconds later —
must fail with 409 instead of overwriting what the new leader wrote. So each kind of write
carries its precondition, and there is no way to send one without it:

- a patch (JSON merge, strategic merge, server-side apply) carries `metadata.resourceVersion`,
  the version of the object the decision read;
- a delete and an eviction carry `preconditions` with the uid and resourceVersion observed;
- a create is conditional by nature: names are fixed, so creating what exists answers
  AlreadyExists (409), which the caller treats as "there already" or "decide again".

Before sending, the writer asks whether this replica may still act for the object's partition
(leading it; or, for the record of work already done, still holding its lease): when it may not,
nothing is sent and the call answers None. The question wraps the whole request, so a lone holder
resting without its lease (decision 0043) takes it again first and does not let it go while the
write is in flight. Every write sent is counted in
`fivespot_writes_total{controller, what}`. A failure is raised as `kube.ApiError` for the caller
to judge (a conflict is an ordinary outcome: decide again on fresh state).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Final

from fivespot.runtime import kube, metrics
from fivespot.runtime.kube import ApiClient

APPLY: Final = "application/apply-patch+yaml"

MayAct = Callable[[str, bool], AbstractContextManager[bool]]
"""`(partition, held)`: around one write, may this replica send it for `partition` now (`held`:
still holding its lease is enough)? (`LeaderElector.writing`)"""


class Writes:
    """The writes of one controller (`component`: its field manager and metric label)."""

    def __init__(self, api: ApiClient, component: str, may_act: MayAct):
        self.api = api
        self.component = component
        self._may_act = may_act

    def patch(self, partition: str, path: str, body: Mapping[str, Any], resource_version: str,
              *, what: str, client: ApiClient | None = None,
              content_type: str = kube.MERGE_PATCH, force: bool = False, held: bool = False,
              timeout: float | tuple[float, float] | None = kube.DEFAULT_TIMEOUT,
              ) -> dict[str, Any] | None:
        """Patch `path` with `body`, conditional on `resource_version`; the answer, or None when
        not sent (no longer ours to write). `force`: a server-side apply taking over fields."""
        meta = dict(body.get("metadata") or {})
        meta["resourceVersion"] = resource_version
        query: dict[str, str] = {"fieldManager": self.component}
        if force:
            query["force"] = "true"
        with self._may_act(partition, held) as may:
            if not may:
                return None
            answer = kube.request(client or self.api, "PATCH", path,
                                  body={**body, "metadata": meta}, content_type=content_type,
                                  query=query, timeout=timeout)
        self._count(what)
        return answer

    def create(self, partition: str, path: str, body: Mapping[str, Any], *, what: str,
               client: ApiClient | None = None) -> dict[str, Any] | None:
        """Create `body` in the collection `path` (AlreadyExists is raised as a 409); None when
        not sent."""
        with self._may_act(partition, False) as may:
            if not may:
                return None
            answer = kube.request(client or self.api, "POST", path, body=dict(body),
                                  query={"fieldManager": self.component})
        self._count(what)
        return answer

    def delete(self, partition: str, path: str, uid: str, resource_version: str | None, *,
               what: str, client: ApiClient | None = None) -> bool:
        """Delete exactly the object observed (its uid and, when known, resourceVersion); False
        when not sent."""
        with self._may_act(partition, False) as may:
            if not may:
                return False
            kube.request(client or self.api, "DELETE", path, body={
                "apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background",
                "preconditions": preconditions(uid, resource_version)})
        self._count(what)
        return True

    def evict(self, partition: str, client: ApiClient, namespace: str, name: str, uid: str,
              resource_version: str | None, *, what: str = "eviction") -> bool:
        """Evict exactly the pod observed (the eviction's delete options carry its uid and
        resourceVersion, so a pod replaced or changed since is not evicted: 409); False when not
        sent."""
        with self._may_act(partition, False) as may:
            if not may:
                return False
            kube.request(client, "POST", kube.resource_path("", "v1", "pods", namespace, name,
                                                            "eviction"), body={
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace},
                "deleteOptions": {"preconditions": preconditions(uid, resource_version)}})
        self._count(what)
        return True

    def _count(self, what: str) -> None:
        metrics.WRITES.labels(controller=self.component, what=what).inc()


def preconditions(uid: str, resource_version: str | None) -> dict[str, str]:
    """A delete's preconditions: the uid, and the resourceVersion when known."""
    found = {"uid": uid}
    if resource_version:
        found["resourceVersion"] = resource_version
    return found
