"""ScheduledMachine as fivespot's machine controller reconciles it: the full spec and status.

`fivespot.api.kinds.scheduled_machine` keeps the thin, foreign shape (schedule pinned, everything else
carried opaquely) that a capacity-only install uses, where 5-Spot's own controller owns the kind.
When a config repo declares `MachineProvisioning`, fivespot reconciles ScheduledMachines itself
and its CRD is generated from these models instead: every field typed and bounded, the embedded
bootstrap and infrastructure objects limited to `{apiVersion, kind, metadata.labels/annotations,
spec}` (their name and namespace are the controller's to choose), and the status the controller
writes (`spotSchedule`, the references of what it created, the node, the shutdown clock).

The compiler narrows `bootstrapSpec` and `infrastructureSpec` further, to the kinds the repo
allows (`embedded_kind_rule`), so a kind the machine identity may not create is refused at
admission rather than failing in the controller.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from pydantic import Field, field_validator

from fivespot.api.kinds.base import KindModel
from fivespot.api.kinds.scheduled_capacity import (
    API_VERSION_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    KIND_PATTERN,
    MAX_CONDITIONS,
    Condition,
    ScheduleRef,
    cel_string,
    parse_duration,
)
from fivespot.api.kinds.names import CAPI_GROUP, MACHINES
from fivespot.api.kinds.scheduled_machine import GROUP, KIND, PLURAL, SHORT_NAMES, VERSION, NodeRef

__all__ = [
    "CAPI_GROUP", "FINALIZER", "MACHINES", "GROUP", "KIND", "PLURAL", "SHORT_NAMES", "VERSION", "EmbeddedObject", "MachinePhase",
    "MachineSpec", "MachineStatus", "ObjectRef", "SpotSchedule", "embedded_kind_rule",
]

DURATION_PATTERN: Final = r"^([0-9]+(\.[0-9]+)?(h|m|s|ms))+$"
MAX_DURATION: Final = "168h"
DURATION_CEL: Final = f"duration(self) <= duration({cel_string(MAX_DURATION)})"
DURATION_MESSAGE: Final = f"must be a duration such as 30s, 10m or 1h30m, at most {MAX_DURATION}"
MAX_TAINTS: Final = 16
MAX_PRIORITY: Final = 1000
LABEL_NAME_PATTERN: Final = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"

_NAME_NAMESPACE_CEL: Final = "!has(self.name) && !has(self.namespace) && !has(self.generateName)"
_NAME_NAMESPACE_MESSAGE: Final = (
    "metadata.name, metadata.generateName and metadata.namespace are chosen by the machine "
    "controller (the object is created next to its Machine, named after the ScheduledMachine); "
    "remove them and keep only labels and annotations"
)


def _rule(rule: str, message: str) -> dict[str, Any]:
    return {"x-kubernetes-validations": [{"rule": rule, "message": message}]}


def _duration(value: str) -> str:
    if parse_duration(value) > parse_duration(MAX_DURATION):
        raise ValueError(DURATION_MESSAGE)
    return value


class EmbeddedMetadata(KindModel):
    """Labels and annotations for the created object; its name and namespace are not yours."""

    labels: dict[str, str] = Field(default_factory=dict, description="Labels to set.",
                                   max_length=64)
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations to set.",
                                        max_length=64)
    name: str | None = Field(default=None, max_length=253,
                             description="Refused: the controller names the object.")
    generate_name: str | None = Field(default=None, max_length=253,
                                      description="Refused: the controller names the object.")
    namespace: str | None = Field(default=None, max_length=63,
                                  description="Refused: the object is created in this namespace.")

    @field_validator("name", "generate_name", "namespace")
    @classmethod
    def _refused(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError(_NAME_NAMESPACE_MESSAGE)
        return value


class EmbeddedObject(KindModel):
    """A CAPI bootstrap or infrastructure object the controller creates for the machine."""

    api_version: str = Field(description="apiVersion of the object, e.g. "
                             "bootstrap.cluster.x-k8s.io/v1beta2.", max_length=316,
                             pattern=API_VERSION_PATTERN)
    kind: str = Field(description="Kind of the object, e.g. KubeadmConfig.", max_length=63,
                      pattern=KIND_PATTERN)
    metadata: EmbeddedMetadata | None = Field(
        default=None, description="Labels and annotations only.",
        json_schema_extra=_rule(_NAME_NAMESPACE_CEL, _NAME_NAMESPACE_MESSAGE))
    spec: dict[str, Any] = Field(default_factory=dict,
                                 description="The object's spec, as its provider defines it.",
                                 json_schema_extra={"type": "object",
                                                    "x-kubernetes-preserve-unknown-fields": True})

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


class Taint(KindModel):
    """A taint CAPI keeps on the node while the machine exists (Machine spec.taints)."""

    key: str = Field(description="Taint key.", max_length=317, pattern=LABEL_NAME_PATTERN)
    value: str | None = Field(default=None, description="Taint value.", max_length=63)
    effect: str = Field(description="NoSchedule, PreferNoSchedule or NoExecute.",
                        json_schema_extra={"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]})

    @field_validator("effect")
    @classmethod
    def _effect(cls, value: str) -> str:
        if value not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ValueError("must be NoSchedule, PreferNoSchedule or NoExecute")
        return value


class MachineSpec(KindModel):
    """A CAPI Machine that exists while a spot schedule says active, drained and removed when not."""

    schedule: ScheduleRef = Field(
        description="The spot-schedule provider to follow, in the same namespace.")
    cluster_name: str = Field(
        description="The CAPI Cluster the machine joins, in this namespace; the platform must "
        "allow it (MachineProvisioning).", max_length=63, pattern=DNS_SUBDOMAIN_PATTERN)
    bootstrap_spec: EmbeddedObject = Field(
        description="The bootstrap object (e.g. a KubeadmConfig) created for the machine.")
    infrastructure_spec: EmbeddedObject = Field(
        description="The infrastructure object (e.g. a DevMachine) created for the machine.")
    enabled: bool = Field(default=True, description="When false the machine is drained and "
                          "removed the ordinary way and stays removed (phase Disabled).")
    kill_switch: bool = Field(default=False, description="When true the machine is deleted at "
                              "once: no grace period, the drain is not awaited (phase Terminated).")
    graceful_shutdown_timeout: str = Field(
        default="0s", description="How long after the schedule closes before the node is "
        "cordoned and drained, e.g. 5m.", max_length=32, pattern=DURATION_PATTERN,
        json_schema_extra=_rule(DURATION_CEL, DURATION_MESSAGE))
    node_drain_timeout: str = Field(
        default="10m", description="How long evictions are retried (PodDisruptionBudgets "
        "respected) before the Machine is deleted anyway.", max_length=32,
        pattern=DURATION_PATTERN, json_schema_extra=_rule(DURATION_CEL, DURATION_MESSAGE))
    node_taints: tuple[Taint, ...] = Field(
        default=(), description="Taints CAPI keeps on the node (the Machine's spec.taints).",
        max_length=MAX_TAINTS)
    priority: int = Field(default=0, ge=0, le=MAX_PRIORITY, description=(
        "Copied to the Machine as the label 5spot.finos.org/priority, for tooling that orders "
        "machines (0-1000); the controller itself treats every machine alike."))

    @field_validator("graceful_shutdown_timeout", "node_drain_timeout")
    @classmethod
    def _bounded_duration(cls, value: str) -> str:
        return _duration(value)

    @property
    def grace(self) -> timedelta:
        return parse_duration(self.graceful_shutdown_timeout)

    @property
    def drain_timeout(self) -> timedelta:
        return parse_duration(self.node_drain_timeout)


FINALIZER: Final = "5spot.finos.org/scheduledmachine"
"""The machine controller's finalizer (upstream 5-Spot's name): a ScheduledMachine being deleted
stays until its machine has left the cluster the safe way (grace, cordon and taint, evictions
honouring PodDisruptionBudgets, nodeDrainTimeout), because the Machine's own deletion by the
garbage collector would skip all of that."""


class MachinePhase(StrEnum):
    PENDING = "Pending"
    ACTIVE = "Active"
    SHUTTING_DOWN = "ShuttingDown"
    INACTIVE = "Inactive"
    DISABLED = "Disabled"
    TERMINATED = "Terminated"
    ERROR = "Error"


class SpotSchedule(KindModel):
    """The provider's answer as the controller resolved it (what the provider contract's Verify
    step reads: docs/design/contracts/schedule-provider.md)."""

    resolved: bool = Field(description="Whether the most recent lookup resolved the provider.")
    active: bool | None = Field(default=None, description="The last resolved status.active; "
                                "unset if never resolved (then the machine is kept out).")
    reason: str = Field(description="Resolved, or why not (ScheduleNotFound, ScheduleNotReady, "
                        "ActiveMissing, ActiveNotBool, ProviderCRDNotInstalled).", max_length=128)
    message: str = Field(default="", description="What was seen.", max_length=1024)
    provider_generation: int | None = Field(default=None, ge=0, description=(
        "metadata.generation of the provider object last read."))
    last_transition_time: datetime | None = Field(default=None, description=(
        "When the held active value last changed."))


class ObjectRef(KindModel):
    """An object the controller created and owns."""

    api_version: str = Field(description="apiVersion.", max_length=316)
    kind: str = Field(description="Kind.", max_length=63)
    name: str = Field(description="Name.", max_length=253)
    namespace: str = Field(description="Namespace.", max_length=63)
    uid: str | None = Field(default=None, description="UID, once created.", max_length=64)


class MachineStatus(KindModel):
    """What the machine controller observed and did. All its state lives here."""

    phase: MachinePhase = Field(default=MachinePhase.PENDING, description="Lifecycle phase.")
    message: str = Field(default="", description="What is happening, for a person.",
                         max_length=1024)
    in_schedule: bool = Field(default=False, description="Whether the machine should be in the "
                              "cluster now (schedule active, enabled, no kill switch).")
    spot_schedule: SpotSchedule | None = Field(default=None, description=(
        "The spot-schedule provider as last resolved."))
    machine_ref: ObjectRef | None = Field(default=None, description="The CAPI Machine.")
    bootstrap_ref: ObjectRef | None = Field(default=None, description="The bootstrap object.")
    infrastructure_ref: ObjectRef | None = Field(default=None,
                                                 description="The infrastructure object.")
    node_ref: NodeRef | None = Field(default=None, description=(
        "The node the Machine became (its status.nodeRef); capacity host governance reads it."))
    shutdown_started_at: datetime | None = Field(default=None, description=(
        "When the machine was first seen out of schedule; the grace period runs from here."))
    drain_started_at: datetime | None = Field(default=None, description=(
        "When the grace period ended and the drain began; nodeDrainTimeout runs from here."))
    observed_generation: int | None = Field(default=None, ge=0, description=(
        "The spec generation this status was computed from."))
    conditions: tuple[Condition, ...] = Field(
        default=(), max_length=MAX_CONDITIONS,
        description="Ready (True when settled: Active, Inactive, Disabled, Terminated), "
        "Reconciling and Stalled (kstatus; present only while True), SpotScheduleResolved, "
        "MachineCreated, NodeDrained.",
        json_schema_extra={"x-kubernetes-list-type": "map",
                           "x-kubernetes-list-map-keys": ["type"]})

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


def embedded_kind_rule(field: str, allowed: list[tuple[str, str]]) -> dict[str, str]:
    """The CEL rule limiting an embedded object to the (group, kind) pairs the repo allows."""
    clauses = [f"(self.apiVersion.startsWith({cel_string(group + '/')}) && "
               f"self.kind == {cel_string(kind)})" for group, kind in sorted(allowed)]
    names = ", ".join(f"{kind} ({group})" for group, kind in sorted(allowed))
    return {"rule": " || ".join(clauses) if clauses else "false",
            "message": f"{field} must be one of the kinds the platform allows: {names}; "
                       "ask the platform team to add yours to MachineProvisioning"}


def bounded(name: str, suffix: str = "", limit: int = 63) -> str:
    """`name + suffix`, shortened with a hash when it would not fit in `limit` characters."""
    import hashlib

    full = name + suffix
    if len(full) <= limit:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{re.sub(r'[-.]+$', '', name[:limit - len(suffix) - 9])}-{digest}{suffix}"
