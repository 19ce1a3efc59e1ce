"""One field, one governor: which ScheduledCapacities name the same field, and which one governs it.

Two ScheduledCapacities govern the same field when they name the same target object — namespace,
API group, kind and name, whatever the version — and their capacity paths are equal or one is a
prefix of the other, segment by segment (`spec.a` and `spec.a.b`; not `spec.a` and `spec.ab`).
Writing one changes the other, so two governors fight over it: one on an open schedule and one on
a closed schedule wrote a pool's field 685 times in 30 seconds before this rule existed.

The rule is defined once, here, and every layer enforces it from this module:

- the webhook denies the create, or the update of the target or path, that would make a second
  governor (`conflicts`, `denial`), naming the first;
- the capacity controller is the backstop for what admission cannot see (the webhook down, two
  creates racing past it): `standing` orders the claims on one target deterministically — the
  oldest `creationTimestamp` first, then the name — and a claim governs its field unless an
  older claim that governs overlaps it. The others write nothing and report the governor;
  deleting the governor hands the field to the next in that order;
- `fivespot check` over a set of files reports the conflicts among the objects it was given.

Schedules are combined by composing them (a CompositeSchedule: anyOf / allOf / not over other
providers' status) and pointing one ScheduledCapacity at the composition, never by two governors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any, Final

from msgspec import Struct
from msgspec.structs import force_setattr

from fivespot.api.fieldpath import capacity_path_error
from fivespot.api.kinds.names import api_group

CHECK: Final = "field-governance"
"""The webhook check's name: every denial starts with it."""

COMPOSE_HINT: Final = (
    "to follow more than one schedule, combine them in one CompositeSchedule (anyOf, allOf, not) "
    "and point a single ScheduledCapacity at it"
)


def target_key(namespace: str, api_version: str, kind: str, name: str) -> str:
    """The identity of a target object, any version: `namespace/group/kind/name`."""
    return f"{namespace}/{api_group(api_version)}/{kind}/{name}"


class Claim(Struct, frozen=True):
    """A ScheduledCapacity's claim on one field of one object."""

    namespace: str
    name: str
    """The ScheduledCapacity's name."""
    api_version: str
    kind: str
    target: str
    """The target object's name (in the same namespace)."""
    path: str
    created: datetime | None = None
    """creationTimestamp; None for an object not created yet (a file, a CREATE request)."""

    key: str = ""
    """Derived, never given: `target_key` of the target (asked for at every comparison)."""

    def __post_init__(self) -> None:
        # Computed here, once, where the claim is made (a `fivespot check` worker), and carried
        # with it when it is sent to the parent (unpickling passes it, so it is not redone).
        if not self.key:
            force_setattr(self, "key", target_key(self.namespace, self.api_version, self.kind,
                                                  self.target))

    @property
    def segments(self) -> tuple[str, ...]:
        """The path's segments (asked for only of claims on one target object)."""
        return tuple(self.path.split("."))

    @property
    def governor(self) -> str:
        """How the claim's ScheduledCapacity is named to users: `namespace/name`."""
        return f"{self.namespace}/{self.name}"

    def describe_target(self) -> str:
        group = api_group(self.api_version)
        kind = f"{self.kind}.{group}" if group else self.kind
        return f"{kind} {self.namespace}/{self.target}"


def _mapping(value: object) -> Mapping[str, Any]:
    if value.__class__ is dict:  # what decoded objects hold: no ABC check needed
        return value
    return value if isinstance(value, Mapping) else _NOTHING


_NOTHING: Final[Mapping[str, Any]] = MappingProxyType({})


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def claim_of(obj: Mapping[str, Any], namespace: str | None = None) -> Claim | None:
    """The claim a raw ScheduledCapacity makes, or None when its spec names no writable field
    (a malformed target reference, or a path the field-path rule refuses: such an object is
    refused by the controller and never writes, so it governs nothing). `namespace` stands in
    for a missing `metadata.namespace` (an object in a file, or in an AdmissionRequest)."""
    meta = _mapping(obj.get("metadata"))
    spec = _mapping(obj.get("spec"))
    target = _mapping(spec.get("targetRef"))
    path = _mapping(spec.get("capacity")).get("path")
    ns = meta.get("namespace") or namespace
    name = meta.get("name")
    fields = (ns, name, target.get("apiVersion"), target.get("kind"), target.get("name"), path)
    for field in fields:
        if not isinstance(field, str) or not field:
            return None
    if capacity_path_error(path) is not None:
        return None
    return Claim(str(ns), str(name), str(target["apiVersion"]), str(target["kind"]),
                 str(target["name"]), str(path), _timestamp(meta.get("creationTimestamp")))


def overlaps(a: Claim, b: Claim) -> bool:
    """Whether two claims of two different objects are on one field: the same target object and
    equal or prefix-related paths."""
    if (a.namespace, a.name) == (b.namespace, b.name) or a.key != b.key:
        return False
    shorter = min(len(a.segments), len(b.segments))
    return a.segments[:shorter] == b.segments[:shorter]


_NEVER: Final = datetime.max.replace(tzinfo=timezone.utc)


def precedence(claim: Claim) -> tuple[datetime, str]:
    """The order in which claims govern: the oldest creationTimestamp first, then the name (the
    timestamp has second precision, and objects synced together share it). A claim without a
    timestamp comes after every created one."""
    return (claim.created or _NEVER, claim.name)


class Governs(Struct, frozen=True):
    """The claim governs its field; `ignored` are the younger claims on it, which write nothing."""

    ignored: tuple[Claim, ...] = ()


class GovernedBy(Struct, frozen=True):
    """An older claim governs the field; this one writes nothing."""

    governor: Claim


Standing = Governs | GovernedBy


def standings(claims: Iterable[Claim]) -> dict[tuple[str, str], Standing]:
    """Every claim's standing, by (namespace, name): in precedence order, a claim governs unless
    a governing claim before it overlaps it. (So with `spec.a.b` older than `spec.a` older than
    `spec.a.c`, both `spec.a.b` and `spec.a.c` govern: `spec.a`, which would overlap both, does
    not, and the two do not overlap each other.)"""
    ordered = sorted({(c.namespace, c.name): c for c in claims}.values(), key=precedence)
    governing: list[Claim] = []
    blocked: dict[tuple[str, str], Claim] = {}
    for claim in ordered:
        first = next((g for g in governing if overlaps(g, claim)), None)
        if first is None:
            governing.append(claim)
        else:
            blocked[(claim.namespace, claim.name)] = first
    found: dict[tuple[str, str], Standing] = {}
    for claim in ordered:
        me = (claim.namespace, claim.name)
        if me in blocked:
            found[me] = GovernedBy(blocked[me])
        else:
            found[me] = Governs(tuple(c for c in ordered
                                      if (c.namespace, c.name) in blocked and overlaps(claim, c)))
    return found


def standing(claim: Claim, others: Iterable[Claim]) -> Standing:
    """The standing of `claim` among `others` (the claims on its target; itself may be among
    them, in an older version: the given one counts)."""
    rest = [o for o in others if (o.namespace, o.name) != (claim.namespace, claim.name)]
    return standings([claim, *rest])[(claim.namespace, claim.name)]


def conflicts(claim: Claim, existing: Iterable[Claim]) -> list[Claim]:
    """The existing claims `claim` would overlap, oldest first: what the webhook denies on."""
    return sorted((e for e in existing if overlaps(claim, e)), key=precedence)


def _path_of(rival: Claim, claim: Claim) -> str:
    if rival.path == claim.path:
        return f"its spec.capacity.path is {rival.path} too"
    return f"its spec.capacity.path {rival.path} overlaps {claim.path}"


def denial(claim: Claim, rivals: list[Claim]) -> str:
    """The webhook's message for a create or update that would make a second governor."""
    first = rivals[0]
    more = f" and {len(rivals) - 1} more" if len(rivals) > 1 else ""
    return (
        f"{CHECK}: spec.capacity.path {claim.path} of {claim.describe_target()} is already "
        f"governed by ScheduledCapacity {first.governor} ({_path_of(first, claim)}){more}, and a "
        f"field has one governor: two would overwrite each other. {COMPOSE_HINT[0].upper()}"
        f"{COMPOSE_HINT[1:]}; or name another object or field"
    )


def governed_by_message(claim: Claim, governor: Claim) -> str:
    """What a ScheduledCapacity that yields to an older governor reports (its condition)."""
    since = f", created {_stamp(governor.created)}" if governor.created else ""
    return (
        f"ScheduledCapacity {governor.governor} governs {claim.path} of {claim.describe_target()} "
        f"({_path_of(governor, claim)}; it is the older{since}), so this object writes nothing to "
        f"it: a field has one governor. Deleting {governor.governor} hands the field over (to "
        f"this object, unless an older one names it too); {COMPOSE_HINT}, and delete the other"
    )


def ignoring_message(claim: Claim, ignored: tuple[Claim, ...], limit: int = 5) -> str:
    """What the governor reports about the younger claims it overrules."""
    names = ", ".join(c.governor for c in ignored[:limit])
    if len(ignored) > limit:
        names += f" and {len(ignored) - limit} more"
    one = len(ignored) == 1
    return (
        f"ScheduledCapacit{'y' if one else 'ies'} {names} also name{'s' if one else ''} "
        f"{claim.path} of {claim.describe_target()} (or a field inside or around it); this object "
        f"is the older and governs it, and {'it writes' if one else 'they write'} nothing. "
        f"Remove {'it' if one else 'them'}, or {COMPOSE_HINT}"
    )


def _stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- writers fivespot does not run -----------------------------------------------------------
#
# A field has one governor, counting the ones fivespot does not run (decision record 0029): an
# autoscaler writes its target's replicas through the scale subresource, so a HorizontalPodAutoscaler
# or a KEDA ScaledObject on a gated object is a second governor (refused like a second
# ScheduledCapacity); a manifest that sets the gated field is what a GitOps engine puts back at
# every sync (warned about, with the one-line fix).

AUTOSCALERS: Final = {
    ("autoscaling", "HorizontalPodAutoscaler"): "spec.minReplicas",
    ("keda.sh", "ScaledObject"): "spec.minReplicaCount",
}
"""The autoscalers fivespot knows, and the field of theirs to gate instead of the target's."""
SCALE_PATH: Final = "spec.replicas"
"""The field an autoscaler writes through `/scale` on a Deployment, StatefulSet or ReplicaSet."""
SCALE_KINDS: Final = frozenset({("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "ReplicaSet")})
"""The built-in kinds whose `/scale` subresource sets `SCALE_PATH` and nothing else."""


def through_scale(group: str, kind: str, capacity_paths: Iterable[str]) -> bool:
    """Whether the capacity controller writes a consumer's field through its `/scale`
    subresource: a built-in scalable kind whose one capacity path is `spec.replicas`. The API
    server then lets that write change the field and nothing else, so RBAC on `<resource>/scale`
    and a ValidatingAdmissionPolicy on its value hold the capacity identity to it
    (decision 0050)."""
    return (group, kind) in SCALE_KINDS and tuple(capacity_paths) == (SCALE_PATH,)


_MANIFEST_DEPTH: Final = 4
GITOPS_FIX: Final = (
    "Take the field out of the manifest in git (Flux's server-side apply then leaves it alone; "
    "Flux has no other per-field option); with Argo CD, the Application's sync option "
    "RespectIgnoreDifferences=true also does, the field left in git"
)
"""The tenant's one-line fix, said the same way by `fivespot check` and the controller."""


class OtherWriter(Struct, frozen=True):
    """A writer of fields of one object that is not a ScheduledCapacity: an autoscaler (its
    scale target's `spec.replicas`) or a manifest (the whole-number fields it sets on itself)."""

    kind: str
    """`Kind.group` of the writer (the autoscaler, or the manifest's own kind)."""
    namespace: str
    name: str
    key: str
    """`target_key` of the object written."""
    paths: tuple[str, ...]
    gate_instead: str = ""
    """An autoscaler's own field to gate instead ("" for a manifest)."""

    @property
    def autoscaler(self) -> bool:
        return bool(self.gate_instead)

    def describe(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def _leaf_counts(node: Mapping[str, Any], prefix: str, depth: int) -> list[str]:
    found: list[str] = []
    for key, value in node.items():
        path = f"{prefix}.{key}"
        if isinstance(value, int) and not isinstance(value, bool):
            found.append(path)
        elif depth > 1 and isinstance(value, Mapping):
            found += _leaf_counts(value, path, depth - 1)
    return found


def writer_of(obj: Mapping[str, Any], namespace: str | None = None) -> OtherWriter | None:
    """What `obj` writes besides through a ScheduledCapacity: an autoscaler's scale target, or
    the whole-number fields under a manifest's `spec` (None for neither)."""
    meta = _mapping(obj.get("metadata"))
    api_version, kind, name = obj.get("apiVersion"), obj.get("kind"), meta.get("name")
    ns = meta.get("namespace") or namespace
    if not all(isinstance(v, str) and v for v in (api_version, kind, name, ns)):
        return None
    group = api_group(str(api_version))
    described = f"{kind}.{group}" if group else str(kind)
    gate = AUTOSCALERS.get((group, str(kind)))
    if gate is not None:
        ref = _mapping(_mapping(obj.get("spec")).get("scaleTargetRef"))
        target_version = ref.get("apiVersion") or ("apps/v1" if group == "keda.sh" else None)
        target_kind = ref.get("kind") or ("Deployment" if group == "keda.sh" else None)
        target = ref.get("name")
        if not all(isinstance(v, str) and v for v in (target_version, target_kind, target)):
            return None
        # A Deployment's, StatefulSet's or ReplicaSet's scale path is spec.replicas; a custom
        # kind's is its CRD's specReplicasPath, which nothing here reads: any field under spec.
        scaled = SCALE_PATH if api_group(str(target_version)) == "apps" else "spec"
        return OtherWriter(described, str(ns), str(name),
                           target_key(str(ns), str(target_version), str(target_kind), str(target)),
                           (scaled,), gate)
    spec = obj.get("spec")
    if str(kind) == "ScheduledCapacity" or not isinstance(spec, Mapping):
        return None
    paths = tuple(_leaf_counts(spec, "spec", _MANIFEST_DEPTH))
    if not paths:
        return None
    return OtherWriter(described, str(ns), str(name),
                       target_key(str(ns), str(api_version), str(kind), str(name)), paths)


def written_by(claim: Claim, writer: OtherWriter) -> str | None:
    """The path of `writer`'s that is on `claim`'s field (equal or prefix-related), or None."""
    if claim.key != writer.key:
        return None
    for path in writer.paths:
        theirs = tuple(path.split("."))
        shorter = min(len(theirs), len(claim.segments))
        if theirs[:shorter] == claim.segments[:shorter]:
            return path
    return None


def autoscaled_message(claim: Claim, writer: OtherWriter) -> str:
    """Why a ScheduledCapacity on a field an autoscaler writes is refused (the webhook,
    `fivespot check`) or writes nothing (the controller): the same words everywhere."""
    return (
        f"{CHECK}: {claim.path} of {claim.describe_target()} is scaled by "
        f"{writer.describe()} (it writes the object's scale subresource), and a field has one "
        "governor: "
        f"the two would overwrite each other. Gate its {writer.gate_instead} instead (point "
        f"spec.targetRef at {writer.describe()} and spec.capacity.path at {writer.gate_instead}), "
        "or remove the autoscaler"
    )


def manifest_warning(claim: Claim, writer: OtherWriter, path: str) -> str:
    """What `fivespot check` says of a manifest that sets a gated field: a GitOps engine
    applying it puts git's value back over the ScheduledCapacity's."""
    return (
        f"{CHECK}: {writer.describe()} sets {path}, which ScheduledCapacity {claim.governor} "
        f"governs: a GitOps engine applying it puts the value in git back over the schedule's. "
        f"{GITOPS_FIX}"
    )
