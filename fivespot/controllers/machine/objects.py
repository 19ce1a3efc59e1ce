"""The request bodies the machine controller sends, built in one place and nowhere else.

Every object it creates has a fixed name derived from the ScheduledMachine (so a retried or
repeated create is an AlreadyExists, never a second Machine), an ownerReference to the
ScheduledMachine with its UID (so ownership is checkable and garbage collection follows it), and
the labels that tie it to its ScheduledMachine and its CAPI Cluster. The preconditions of
deletions and evictions are the conditional writer's (`fivespot.runtime.writes`): an object deleted and
re-created by someone else in between is never deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from fivespot.api.kinds import machine_lifecycle as lifecycle
from fivespot.api.kinds.machine_lifecycle import EmbeddedObject, MachineSpec, MachineStatus, bounded
from fivespot.controllers.machine.observations import SHUTDOWN_TAINT_KEY

CAPI_GROUP: Final = "cluster.x-k8s.io"
CLUSTER_NAME_LABEL: Final = "cluster.x-k8s.io/cluster-name"
OWNER_LABEL: Final = "5spot.finos.org/scheduled-machine"
PRIORITY_LABEL: Final = "5spot.finos.org/priority"


@dataclass(frozen=True)
class Names:
    machine: str
    bootstrap: str
    infrastructure: str


def names(scheduled_machine: str) -> Names:
    return Names(bounded(scheduled_machine), bounded(scheduled_machine, "-bootstrap"),
                 bounded(scheduled_machine, "-infra"))


def owner_reference(name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": f"{lifecycle.GROUP}/{lifecycle.VERSION}", "kind": lifecycle.KIND, "name": name, "uid": uid,
            "controller": True}


def _labels(spec: MachineSpec, owner: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**(extra or {}), CLUSTER_NAME_LABEL: spec.cluster_name, OWNER_LABEL: bounded(owner)}


def embedded(obj: EmbeddedObject, spec: MachineSpec, owner: str, uid: str, name: str,
             namespace: str) -> dict[str, Any]:
    """A bootstrap or infrastructure object from its embedded template."""
    meta = obj.metadata
    metadata: dict[str, Any] = {
        "name": name, "namespace": namespace,
        "labels": _labels(spec, owner, meta.labels if meta else None),
        "ownerReferences": [owner_reference(owner, uid)],
    }
    if meta is not None and meta.annotations:
        metadata["annotations"] = dict(meta.annotations)
    return {"apiVersion": obj.api_version, "kind": obj.kind, "metadata": metadata,
            "spec": dict(obj.spec)}


def machine(spec: MachineSpec, owner: str, uid: str, namespace: str, version: str) -> dict[str, Any]:
    """The CAPI Machine (v1beta2 references: apiGroup + kind + name)."""
    n = names(owner)
    body: dict[str, Any] = {
        "apiVersion": f"{CAPI_GROUP}/{version}", "kind": "Machine",
        "metadata": {"name": n.machine, "namespace": namespace,
                     "labels": {**_labels(spec, owner), PRIORITY_LABEL: str(spec.priority)},
                     "ownerReferences": [owner_reference(owner, uid)]},
        "spec": {
            "clusterName": spec.cluster_name,
            "bootstrap": {"configRef": {"apiGroup": spec.bootstrap_spec.group,
                                        "kind": spec.bootstrap_spec.kind, "name": n.bootstrap}},
            "infrastructureRef": {"apiGroup": spec.infrastructure_spec.group,
                                  "kind": spec.infrastructure_spec.kind, "name": n.infrastructure},
        },
    }
    if spec.node_taints:
        body["spec"]["taints"] = [
            {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect,
             "propagation": "Always"} for t in spec.node_taints]
    return body


def cordon_patch() -> dict[str, Any]:
    """Strategic merge patch for the node: unschedulable, plus the shutting-down taint (taints
    merge by key, so the node's other taints stay)."""
    return {"spec": {"unschedulable": True,
                     "taints": [{"key": SHUTDOWN_TAINT_KEY, "effect": "NoSchedule"}]}}


def status_json(status: MachineStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def status_patch(prior: Mapping[str, Any] | None, desired: MachineStatus) -> dict[str, Any] | None:
    """The merge patch turning the raw prior status into `desired`, or None when they agree.
    Top-level fields are sent whole (lists such as conditions are replaced anyway); fields the
    desired status no longer has are sent as null (deleted)."""
    after = status_json(desired)
    before: dict[str, Any] = {}
    if prior:
        try:
            before = status_json(MachineStatus.model_validate(prior))
        except ValueError:
            before = dict(prior)
    patch = {k: v for k, v in after.items() if before.get(k) != v}
    patch.update({k: None for k in before if k not in after})
    return {"status": patch} if patch else None
