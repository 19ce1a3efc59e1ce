"""The watch-fed look-ups the checks read: ScheduledMachines by namespace, ScheduledCapacities by
the object they target, Namespaces by name.

All come from the controller runtime's `Informer` (list + watch into a local cache), so deciding
a request never makes an API call: admission latency does not depend on the API server's, and a
burst of ScheduledCapacity writes does not turn into a burst of ScheduledMachine lists.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from fivespot.api.fieldgovernance import claim_of
from fivespot.api.kinds import scheduled_capacity as scap
from fivespot.api.kinds import scheduled_machine
from fivespot.runtime import kube
from fivespot.runtime.informer import Informer
from fivespot.runtime.kube import ApiClient

BY_NAMESPACE: Final = "namespace"
BY_TARGET: Final = "target"


def _namespace_of(obj: Mapping[str, Any]) -> list[str]:
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return [namespace] if isinstance(namespace, str) else []


class MachinesByNamespace(Mapping[str, list[dict[str, Any]]]):
    """The cached ScheduledMachines of each namespace (a read-only view, no copy)."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer

    def __getitem__(self, namespace: str) -> list[dict[str, Any]]:
        return self.informer.by_index(BY_NAMESPACE, namespace)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({n for o in self.informer.list() for n in _namespace_of(o)}))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def machine_informer(api: ApiClient) -> Informer:
    informer = Informer(api, scheduled_machine.GROUP, scheduled_machine.VERSION, scheduled_machine.PLURAL)
    informer.add_index(BY_NAMESPACE, _namespace_of)
    return informer


def _target_of(obj: Mapping[str, Any]) -> list[str]:
    claim = claim_of(obj)
    return [claim.key] if claim is not None else []


class CapacitiesByTarget:
    """`lookup(key)`: the cached ScheduledCapacities naming one target object (any version), by
    `fivespot.api.fieldgovernance.target_key`."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer

    def __call__(self, key: str) -> list[dict[str, Any]]:
        return self.informer.by_index(BY_TARGET, key)


class CapacityNow:
    """`read(namespace, name)`: one ScheduledCapacity from the API server now, None when it is
    gone (raises kube.ApiError otherwise). Only a field-governance denial calls it, to confirm
    what the cache says; the timeout keeps it well inside the webhook's own."""

    def __init__(self, api: ApiClient, timeout_s: float = 1.0) -> None:
        self.api = api
        self.timeout_s = timeout_s

    def __call__(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        path = kube.resource_path(scap.GROUP, scap.VERSION, scap.PLURAL, namespace, name)
        try:
            return kube.request(self.api, "GET", path, timeout=(self.timeout_s, self.timeout_s))
        except kube.ApiError as error:
            if error.not_found:
                return None
            raise


AUTOSCALER_RESOURCES: Final = (("autoscaling", "v2", "horizontalpodautoscalers"),
                                ("keda.sh", "v1alpha1", "scaledobjects"))
"""What the field-governance check lists (`fivespot.api.fieldgovernance.AUTOSCALERS`): a KEDA that is not
installed answers 404, which is none."""


class AutoscalersNow:
    """`list(namespace)`: the HorizontalPodAutoscalers and KEDA ScaledObjects in a namespace,
    read from the API server now. Only a ScheduledCapacity create (or a change of its target or
    path) asks: rare, so no cache (decision record 0029). Raises kube.ApiError when a list
    fails for another reason than 404."""

    def __init__(self, api: ApiClient, timeout_s: float = 1.0) -> None:
        self.api = api
        self.timeout_s = timeout_s

    def __call__(self, namespace: str) -> list[Mapping[str, Any]]:
        found: list[Mapping[str, Any]] = []
        for group, version, plural in AUTOSCALER_RESOURCES:
            path = kube.resource_path(group, version, plural, namespace)
            try:
                answer = kube.request(self.api, "GET", path, timeout=(self.timeout_s, self.timeout_s))
            except kube.ApiError as error:
                if error.not_found:
                    continue
                raise
            kind = "HorizontalPodAutoscaler" if plural == "horizontalpodautoscalers" else "ScaledObject"
            for item in answer.get("items") or ():
                if isinstance(item, dict):  # a list's items carry no apiVersion or kind
                    found.append({**item, "apiVersion": f"{group}/{version}", "kind": kind})
        return found


def capacity_informer(api: ApiClient) -> Informer:
    informer = Informer(api, scap.GROUP, scap.VERSION, scap.PLURAL)
    informer.add_index(BY_TARGET, _target_of)
    return informer


def namespace_informer(api: ApiClient) -> Informer:
    return Informer(api, "", "v1", "namespaces")


class NamespaceObjects:
    """`lookup(name)`: the cached Namespace object, or None."""

    def __init__(self, informer: Informer | None) -> None:
        self.informer = informer

    def __call__(self, name: str) -> Mapping[str, Any] | None:
        return self.informer.get(None, name) if self.informer is not None else None
