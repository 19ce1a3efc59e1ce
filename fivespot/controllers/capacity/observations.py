"""What the capacity controller's I/O shell observed, as frozen values for `decide`.

The shell does the API calls; this module fixes the vocabulary it reports them in, and holds the
few pure translations from raw objects (a field at a dotted path, a ScheduledMachine's nodeRef;
the provider contract is `fivespot.api.provider_contract`, shared with every other consumer of a
provider) so that the shell stays a thin loop with no judgement of its own.
Each observation distinguishes "looked and it is not there" from "could not look" (a transient
API error), because the contract treats them differently: the first is reported and acted on, the
second flips nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Final, TypeVar

from pydantic import ValidationError

from fivespot.api.bundle import Consumer
from fivespot.api.fieldgovernance import Governs, OtherWriter, Standing
from fivespot.api.fieldpath import capacity_path_error, drained_path_error, split_path
from fivespot.api.kinds.scheduled_capacity import ScheduledCapacitySpec, ScheduledCapacityStatus
from fivespot.api.kinds.scheduled_machine import governed_node
from fivespot.api.kinds.invalid import InvalidSpec as InvalidSpec
from fivespot.controllers.inforce import OutOfPolicy as OutOfPolicy
from fivespot.controllers.inforce import PolicyObservation as PolicyObservation
from fivespot.controllers.inforce import WithinPolicy as WithinPolicy
from fivespot.api.provider_contract import LookupFailed, ScheduleObservation


class Absent(Enum):
    """A field that is not present on the object (distinct from JSON null)."""

    ABSENT = "absent"


ABSENT: Final = Absent.ABSENT


@dataclass(frozen=True)
class TargetFound:
    """The target exists; the raw values at capacity.path and handback.drainedPath."""

    value: object = ABSENT
    drained: object = ABSENT
    resource_version: str | None = field(default=None, compare=False)
    """The version observed: a write to the target is conditional on it."""
    writer: str | None = field(default=None, compare=False)
    """The field manager owning the capacity path, read from the target's managedFields only
    when `decide` asks (`Decision.ask_writer`: a repair); "" when it could not be read."""
    count: int | None = field(init=False, compare=False, repr=False)
    """`value` as a whole number (None: absent, or not one), converted once here."""
    drained_count: int | None = field(init=False, compare=False, repr=False)
    """`drained` as a whole number (None: absent, or not one)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "count", as_count(self.value))
        object.__setattr__(self, "drained_count", as_count(self.drained))


@dataclass(frozen=True)
class TargetNotFound:
    """The shell looked and there is no such target (404)."""


TargetObservation = TargetFound | TargetNotFound | LookupFailed


@dataclass(frozen=True, order=True)
class MachineNode:
    """A ScheduledMachine in the namespace and the node its status.nodeRef names."""

    machine: str
    node: str


MachinesObservation = tuple[MachineNode, ...] | LookupFailed




@dataclass(frozen=True)
class DecisionInput:
    """Everything `decide` looks at. `now` is injected so the function stays pure."""

    namespace: str
    name: str
    generation: int
    spec: ScheduledCapacitySpec | InvalidSpec
    schedule: ScheduleObservation
    target: TargetObservation
    machines: MachinesObservation
    allowlist: Consumer | None
    """The compiled bundle's entry for the target's kind: what the controller may write."""
    prior: ScheduledCapacityStatus | None
    now: datetime
    field_standing: Standing = Governs()
    """Whether this object governs its field or an older ScheduledCapacity does
    (`fivespot.api.fieldgovernance.standing` over the claims on the same target)."""
    policy: PolicyObservation = WithinPolicy()
    """Whether the tenant's policies in force now allow the object (the params in the cluster)."""
    autoscalers: tuple[OtherWriter, ...] = ()
    """The HPAs and KEDA ScaledObjects in the namespace that scale the governed field
    (`fivespot.api.fieldgovernance.written_by`): each is a governor fivespot does not run."""


def parse_spec(raw: object) -> ScheduledCapacitySpec | InvalidSpec:
    """The object's `spec` as a model, or the reasons it is not one."""
    if not isinstance(raw, Mapping):
        return InvalidSpec(raw={}, errors=(f"spec is a {type(raw).__name__}, not an object",))
    try:
        return ScheduledCapacitySpec.model_validate(raw)
    except ValidationError as error:
        return InvalidSpec(
            raw=dict(raw),
            errors=tuple(
                f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
            ),
        )


class SpecMemo:
    """Each object's parsed spec, kept per (uid, generation) under its cache key: the API server
    counts every change of a custom resource's spec in its generation, so a reconcile after a
    status write, or an event of its target or schedule, parses nothing. An object without a uid
    or generation is parsed every time. Reconciles of one key never run at once (the workqueue),
    so one key's entry has one writer.

    The prior status is kept the same way per (uid, resourceVersion): a version of an object
    never changes, so the reconcile of a target's or a schedule's event parses no status either
    (`status`)."""

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[str, object, ScheduledCapacitySpec | InvalidSpec]] = {}
        self._statuses: dict[str, tuple[str, object, ScheduledCapacityStatus | None]] = {}

    def parse(self, key: str, obj: Mapping[str, Any]) -> ScheduledCapacitySpec | InvalidSpec:
        """`parse_spec` of `obj`'s spec, from the last parse of the same uid and generation."""
        generation = _meta(obj).get("generation")
        usable = isinstance(generation, int) and not isinstance(generation, bool) and generation > 0
        return _kept(self._parsed, key, obj, generation if usable else None,
                     lambda: parse_spec(obj.get("spec")))

    def status(self, key: str, obj: Mapping[str, Any]) -> ScheduledCapacityStatus | None:
        """`parse_status` of `obj`'s status, from the last parse of the same uid and
        resourceVersion."""
        version = _meta(obj).get("resourceVersion")
        return _kept(self._statuses, key, obj, version if isinstance(version, str) and version
                     else None, lambda: parse_status(obj.get("status")))

    def forget(self, key: str) -> None:
        """The object is gone."""
        self._parsed.pop(key, None)
        self._statuses.pop(key, None)


Parsed = TypeVar("Parsed")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _kept(store: dict[str, tuple[str, object, Parsed]], key: str, obj: Mapping[str, Any],
          version: object, parse: Callable[[], Parsed]) -> Parsed:
    """`parse()`, or what it gave for the same uid and `version` of `key` (None: no usable
    version, parsed every time)."""
    uid = _meta(obj).get("uid")
    if not isinstance(uid, str) or not uid or version is None:
        return parse()
    found = store.get(key)
    if found is not None and found[0] == uid and found[1] == version:
        return found[2]
    parsed = parse()
    store[key] = (uid, version, parsed)
    return parsed


def parse_status(raw: object) -> ScheduledCapacityStatus | None:
    """The object's prior `status`, or None when absent or not in this controller's shape.

    An unreadable status is treated as a first reconcile; the state it held is rebuilt from what
    the controller observes, which is safe because every decision re-checks the target.
    """
    if not isinstance(raw, Mapping) or not raw:
        return None
    try:
        return ScheduledCapacityStatus.model_validate(raw)
    except ValidationError:
        return None


def read_field(obj: Mapping[str, object], path: str) -> object:
    """The value at a dotted path that passed its field-path rule, or ABSENT."""
    node: object = obj
    for segment in split_path(path):
        if not isinstance(node, Mapping) or segment not in node:
            return ABSENT
        node = node[segment]
    return node


def as_count(value: object) -> int | None:
    """`value` as a whole number, or None when it is not one (bools and strings are not)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def observe_target(
    target: Mapping[str, object] | None, spec: ScheduledCapacitySpec
) -> TargetFound | TargetNotFound:
    """The values a target object (None on 404) holds at the spec's paths.

    A path that fails its rule is not read at all; `decide` refuses such a spec anyway.
    """
    if target is None:
        return TargetNotFound()
    path = spec.capacity.path
    value = read_field(target, path) if capacity_path_error(path) is None else ABSENT
    drained: object = ABSENT
    if spec.handback is not None and drained_path_error(spec.handback.drained_path) is None:
        drained = read_field(target, spec.handback.drained_path)
    meta = target.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return TargetFound(value=value, drained=drained,
                       resource_version=str(version) if version is not None else None)


def field_owner(managed_fields: object, path: str, ours: str) -> str | None:
    """The field manager that owns `path` in a `metadata.managedFields` list: among the entries
    whose fieldsV1 holds the path, the most recent one that is not `ours` (two managers share a
    field that both set to the same value), else `ours`; None when no entry holds it."""
    if not isinstance(managed_fields, list):
        return None
    owners: list[tuple[str, str]] = []
    for entry in managed_fields:
        if not isinstance(entry, Mapping):
            continue
        node: object = entry.get("fieldsV1")
        for segment in split_path(path):
            node = node.get(f"f:{segment}") if isinstance(node, Mapping) else None
        manager = entry.get("manager")
        if node is not None and isinstance(manager, str):
            owners.append((str(entry.get("time") or ""), manager))
    others = sorted(o for o in owners if o[1] != ours)
    if others:
        return others[-1][1]
    return ours if owners else None


def observe_machines(machines: Iterable[Mapping[str, object]]) -> tuple[MachineNode, ...]:
    """The (machine, node) pairs of ScheduledMachines whose status names a node."""
    pairs = []
    for machine in machines:
        metadata = machine.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        node = governed_node(machine.get("status"))
        if node is not None:
            pairs.append(MachineNode(machine=str(name), node=node))
    return tuple(sorted(pairs))
