"""ScheduledMachine `5spot.finos.org/v1beta1`, only as much as fivespot needs of it.

fivespot does not reconcile ScheduledMachines. It installs their CRD (so the schedule reference
is pinned to the provider group at admission) and the capacity controller reads
`status.nodeRef.name` for host governance: a node named there is governed by the machine side,
and a ScheduledCapacity naming the same node must hold its value at 0. The provisioning fields
belong to the machine controller and are carried opaquely.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import Field
from pydantic.config import JsonDict

from fivespot.api.kinds.base import KindModel, PreservingModel
from fivespot.api.kinds.scheduled_capacity import (
    DNS_SUBDOMAIN_PATTERN,
    HANDBACK_TIMEOUT_PATTERN,
    MAX_CONDITIONS,
    Condition,
    ScheduleRef,
)

GROUP: Final = "5spot.finos.org"
VERSION: Final = "v1beta1"
KIND: Final = "ScheduledMachine"
PLURAL: Final = "scheduledmachines"
SHORT_NAMES: Final = ("sm",)

_OPAQUE: Final[JsonDict] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


class _Foreign(PreservingModel):
    """5-Spot's own controller owns ScheduledMachine; fields fivespot does not model are kept
    (the CRD preserves them rather than pruning a newer 5-Spot's data), and never read."""


class ScheduledMachineSpec(_Foreign):
    """Which provider decides whether the machine is in the cluster, and how to build it."""

    schedule: ScheduleRef = Field(
        description="The spot-schedule provider to follow, in the same namespace."
    )
    cluster_name: str | None = Field(
        default=None,
        description="The CAPI cluster the machine joins.",
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
    )
    bootstrap_spec: dict[str, Any] | None = Field(
        default=None,
        description="CAPI bootstrap template, owned by the machine controller.",
        json_schema_extra=_OPAQUE,
    )
    infrastructure_spec: dict[str, Any] | None = Field(
        default=None,
        description="CAPI infrastructure template, owned by the machine controller.",
        json_schema_extra=_OPAQUE,
    )
    node_drain_timeout: str | None = Field(
        default=None,
        description="How long the machine controller waits for the node to drain, e.g. 10m.",
        max_length=32,
        pattern=HANDBACK_TIMEOUT_PATTERN,
    )
    enabled: bool = Field(default=True, description="When false the schedule is ignored.")
    kill_switch: bool = Field(
        default=False, description="When true the machine is removed immediately."
    )


class NodeRef(KindModel):
    """The Kubernetes node the machine became."""

    name: str = Field(
        description="Node name; host governance compares it with ScheduledCapacity nodeName.",
        max_length=253,
    )


class ScheduledMachineStatus(_Foreign):
    """The machine controller's report; fivespot reads nodeRef and nothing else."""

    phase: str | None = Field(
        default=None,
        description="Lifecycle phase as reported by the machine controller.",
        max_length=64,
    )
    node_ref: NodeRef | None = Field(
        default=None, description="The node the machine joined as, once it has joined."
    )
    observed_generation: int | None = Field(
        default=None, description="The spec generation this status was computed from.", ge=0
    )
    conditions: tuple[Condition, ...] = Field(
        default=(),
        description="Conditions reported by the machine controller.",
        max_length=MAX_CONDITIONS,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )


def governed_node(status: object) -> str | None:
    """The node a ScheduledMachine's raw `status` says it governs, or None.

    Tolerant on purpose: host governance must not go blind because some other status field of a
    machine fails this module's stricter model.
    """
    if not isinstance(status, Mapping):
        return None
    node_ref = status.get("nodeRef")
    if not isinstance(node_ref, Mapping):
        return None
    name = node_ref.get("name")
    return name if isinstance(name, str) and name else None
