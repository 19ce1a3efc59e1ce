"""What the machine controller's shell observed, as frozen values for `decide`.

The shell reads the management cluster (the ScheduledMachine, its provider, the CAPI objects it
created) and, only when a drain needs it, the workload cluster (the node and its pods). This
module fixes the vocabulary and holds the pure translations from raw objects: whether an object
with the controller's chosen name is really its own (owner UID), which pods `kubectl drain`
would evict, whether the node is already cordoned. As on the capacity side, "could not look"
(`LookupFailed`) is kept apart from "looked and it is not there".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from fivespot.api.kinds.invalid import InvalidSpec
from fivespot.api.kinds.machine_lifecycle import MachineSpec, MachineStatus
from fivespot.api.provider_contract import (
    LookupFailed,
    Resolved,
    ScheduleObservation,
    Unresolved,
    UnresolvedReason,
    observe_schedule,
)

__all__ = [
    "DecisionInput", "Foreign", "InvalidSpec", "LookupFailed", "NodeGone", "NodeSeen", "Owned",
    "PodOnNode", "RefusedKubeconfig", "Resolved", "ScheduleObservation", "Unresolved",
    "UnresolvedReason",
    "observe_node", "observe_owned", "observe_schedule", "parse_spec", "parse_status",
]

SHUTDOWN_TAINT_KEY: Final = "5spot.finos.org/shutting-down"
"""The taint the controller puts on a node it is draining (effect NoSchedule)."""
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"


@dataclass(frozen=True)
class Owned:
    """An object with the controller's chosen name whose ownerReference is this ScheduledMachine."""

    name: str
    uid: str
    deleting: bool = False
    node: str | None = None
    """For the Machine: its status.nodeRef.name, once CAPI has set it."""
    resource_version: str | None = None
    """The version observed: a delete is conditional on it."""


@dataclass(frozen=True)
class Foreign:
    """An object with the chosen name that this ScheduledMachine does not own: never touched."""

    name: str


ObjectObservation = Owned | Foreign | LookupFailed | None
"""None: looked, and there is no such object."""


@dataclass(frozen=True, order=True)
class PodOnNode:
    """A pod on the node that the drain must see gone (DaemonSet and mirror pods excluded)."""

    namespace: str
    name: str
    terminating: bool = False
    uid: str = field(default="", compare=False)
    resource_version: str | None = field(default=None, compare=False)
    """The pod as observed: its eviction is conditional on both (decision record 0011)."""


@dataclass(frozen=True)
class NodeSeen:
    """The node in the workload cluster, and what still runs on it."""

    name: str
    cordoned: bool
    tainted: bool
    pods: tuple[PodOnNode, ...]
    resource_version: str | None = field(default=None, compare=False)
    """The node as observed: the cordon is conditional on it (decision record 0011)."""


@dataclass(frozen=True)
class NodeGone:
    """The workload cluster has no such node (it left, or never joined)."""


@dataclass(frozen=True)
class RefusedKubeconfig:
    """CAPI's kubeconfig Secret was read, and fivespot will not use it (an exec plugin, a file
    path, no pinned CA, ...): nothing was sent to the workload cluster. Unlike a LookupFailed it
    needs a person; `message` names the Secret and the refused fields, never a value."""

    message: str


NodeObservation = NodeSeen | NodeGone | LookupFailed | RefusedKubeconfig | None
"""None: not looked at (the decision did not need it)."""


@dataclass(frozen=True)
class DecisionInput:
    """Everything `decide` looks at; `now` is injected so the function stays pure."""

    namespace: str
    name: str
    uid: str
    generation: int
    spec: MachineSpec | InvalidSpec
    refusal: str | None
    """Why the bundle does not allow this spec (cluster, embedded kind), or None."""
    schedule: ScheduleObservation
    provider_generation: int | None
    prior: MachineStatus | None
    machine: ObjectObservation
    bootstrap: ObjectObservation
    infrastructure: ObjectObservation
    node: NodeObservation
    now: datetime
    machine_api_version: str = "cluster.x-k8s.io/v1beta2"
    finalizer: bool = False
    """Whether the object carries the controller's finalizer."""
    deleting_since: datetime | None = None
    """metadata.deletionTimestamp: the object is being deleted."""


def parse_spec(raw: object) -> MachineSpec | InvalidSpec:
    if not isinstance(raw, Mapping):
        return InvalidSpec(raw={}, errors=(f"spec is a {type(raw).__name__}, not an object",))
    try:
        return MachineSpec.model_validate(raw)
    except ValidationError as error:
        return InvalidSpec(raw=dict(raw), errors=tuple(
            f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()))


def parse_status(raw: object) -> MachineStatus | None:
    """The prior status, or None when absent or unreadable (then rebuilt from observation)."""
    if not isinstance(raw, Mapping) or not raw:
        return None
    try:
        return MachineStatus.model_validate(raw)
    except ValidationError:
        return None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def owner_uids(obj: Mapping[str, Any]) -> set[str]:
    refs = _mapping(obj.get("metadata")).get("ownerReferences")
    return {str(r.get("uid")) for r in refs if isinstance(r, Mapping)} if isinstance(refs, list) else set()


def observe_owned(obj: Mapping[str, Any] | None, owner_uid: str) -> Owned | Foreign | None:
    """An object fetched by the controller's chosen name (None on 404), judged by its owner."""
    if obj is None:
        return None
    meta = _mapping(obj.get("metadata"))
    name = str(meta.get("name", ""))
    if owner_uid not in owner_uids(obj):
        return Foreign(name)
    node = _mapping(_mapping(obj.get("status")).get("nodeRef")).get("name")
    version = meta.get("resourceVersion")
    return Owned(name=name, uid=str(meta.get("uid", "")),
                 deleting=bool(meta.get("deletionTimestamp")),
                 node=node if isinstance(node, str) and node else None,
                 resource_version=str(version) if version is not None else None)


def _drained_by_kubectl(pod: Mapping[str, Any]) -> bool:
    """Whether `kubectl drain --ignore-daemonsets` deletes this pod: not a mirror pod (the
    kubelet's static pods cannot be evicted) and not a DaemonSet's (it would come straight back)."""
    meta = _mapping(pod.get("metadata"))
    if MIRROR_ANNOTATION in _mapping(meta.get("annotations")):
        return False
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, Mapping) and ref.get("kind") == "DaemonSet" and ref.get("controller"):
            return False
    return True


def observe_node(node: Mapping[str, Any] | None, pods: Iterable[Mapping[str, Any]]) -> NodeSeen | NodeGone:
    """The node (None on 404) and the pods bound to it, as the drain sees them."""
    if node is None:
        return NodeGone()
    spec = _mapping(node.get("spec"))
    raw_taints = spec.get("taints")
    taints = raw_taints if isinstance(raw_taints, list) else []
    tainted = any(isinstance(t, Mapping) and t.get("key") == SHUTDOWN_TAINT_KEY for t in taints)
    remaining = []
    for pod in pods:
        if not _drained_by_kubectl(pod):
            continue
        meta = _mapping(pod.get("metadata"))
        remaining.append(PodOnNode(str(meta.get("namespace", "")), str(meta.get("name", "")),
                                   terminating=bool(meta.get("deletionTimestamp")),
                                   uid=str(meta.get("uid", "")),
                                   resource_version=_version(meta)))
    node_meta = _mapping(node.get("metadata"))
    return NodeSeen(name=str(node_meta.get("name", "")),
                    cordoned=bool(spec.get("unschedulable")), tainted=tainted,
                    pods=tuple(sorted(remaining)), resource_version=_version(node_meta))


def _version(meta: Mapping[str, Any]) -> str | None:
    version = meta.get("resourceVersion")
    return str(version) if version is not None else None


def provider_generation(provider: Mapping[str, Any] | None) -> int | None:
    generation = _mapping(_mapping(provider).get("metadata")).get("generation")
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else None
