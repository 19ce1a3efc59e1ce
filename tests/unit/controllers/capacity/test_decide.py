"""The capacity controller's decision table: every phase transition and every condition reason of
docs/design/contracts/scheduled-capacity.md, each row one behaviour sentence. Priors are produced
by running `decide` on earlier events, so a row starts from a status the controller would really
have written.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fivespot.api.bundle import Bundle, BundleError, Consumer, parse_bundle
from fivespot.api.fieldgovernance import Claim, GovernedBy, Governs, Standing
from fivespot.api.kinds.scheduled_capacity import (
    Capacity,
    ConditionStatus,
    Phase,
    ScheduledCapacitySpec,
    ScheduledCapacityStatus,
)
from fivespot.api.provider_contract import (
    LookupFailed,
    Resolved,
    ScheduleObservation,
    Unresolved,
    UnresolvedReason,
)
from fivespot.controllers.capacity.conditions import (
    FIELD_CONTESTED,
    CAPACITY_WRITTEN,
    CONDITION_TYPES,
    FIELD_GOVERNANCE_CONFLICT,
    HANDBACK_COMPLETE,
    HOST_GOVERNANCE_CONFLICT,
    READY,
    RECONCILING,
    SPOT_SCHEDULE_RESOLVED,
    STALLED,
    TARGET_RESOLVED,
)
from fivespot.controllers.capacity.decide import Decision, decide, status_patch, target_patch, write_failed
from fivespot.controllers.capacity.patches import as_scaled, scale_apply
from fivespot.controllers.capacity.observations import (
    PolicyObservation,
    WithinPolicy,
    ABSENT,
    DecisionInput,
    MachineNode,
    MachinesObservation,
    TargetFound,
    TargetNotFound,
    TargetObservation,
    observe_machines,
    observe_target,
    parse_spec,
    parse_status,
)

GOLDEN_BUNDLE = Path(__file__).resolve().parents[2] / "golden" / "agent-sandbox" / "bundle.json"
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TIMEOUT = timedelta(minutes=15)
ACTIVE_VALUE = 10
ENTRY = Consumer(
    name="agents",
    group="pools.example.com",
    version="v1",
    kind="Pool",
    resource="pools",
    capacity_paths=("spec.warmReplicas", "spec.pool.size"),
    drained_path="status.inUse",
    max_active_value=16,
)


def spec_dict(**changes: Any) -> dict[str, Any]:
    """A valid spec; keyword arguments replace top-level keys (None removes the key)."""
    spec: dict[str, Any] = {
        "schedule": {
            "apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
            "kind": "ManualSchedule",
            "name": "desk",
        },
        "targetRef": {"apiVersion": "pools.example.com/v1", "kind": "Pool", "name": "agents"},
        "capacity": {"path": "spec.warmReplicas", "activeValue": ACTIVE_VALUE},
        "handback": {"drainedPath": "status.inUse", "timeout": "15m"},
    }
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


def given(
    *,
    spec: dict[str, Any] | None = None,
    schedule: ScheduleObservation = Resolved(True),
    target: TargetObservation = TargetFound(0, 0),
    machines: MachinesObservation = (),
    allowlist: Consumer | None = ENTRY,
    prior: ScheduledCapacityStatus | None = None,
    now: datetime = NOW,
    generation: int = 1,
    field_standing: Standing = Governs(),
    policy: PolicyObservation = WithinPolicy(),
    autoscalers: tuple[Any, ...] = (),
) -> DecisionInput:
    return DecisionInput(
        namespace="tenant-a",
        name="agents-capacity",
        generation=generation,
        spec=parse_spec(spec if spec is not None else spec_dict()),
        schedule=schedule,
        target=target,
        machines=machines,
        allowlist=allowlist,
        prior=prior,
        now=now,
        field_standing=field_standing,
        policy=policy,
        autoscalers=autoscalers,
    )


def after(*steps: DecisionInput) -> ScheduledCapacityStatus:
    """The status left behind by deciding each step in turn, each fed the previous status."""
    status: ScheduledCapacityStatus | None = None
    for step in steps:
        status = decide(replace(step, prior=status)).status
    assert status is not None
    return status


# Priors, named by the state the object is in.
def active() -> ScheduledCapacityStatus:
    return after(given(target=TargetFound(0, 0)), given(target=TargetFound(ACTIVE_VALUE, 4)))


def handing_back() -> ScheduledCapacityStatus:
    return after(
        given(target=TargetFound(ACTIVE_VALUE, 4)),
        given(schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE, 4)),
    )


def draining() -> ScheduledCapacityStatus:
    return after(
        given(target=TargetFound(ACTIVE_VALUE, 4)),
        given(schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE, 4)),
        given(schedule=Resolved(False), target=TargetFound(0, 3)),
    )


def timed_out() -> ScheduledCapacityStatus:
    return after(
        given(target=TargetFound(ACTIVE_VALUE, 4)),
        given(schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE, 4)),
        given(schedule=Resolved(False), target=TargetFound(0, 3), now=NOW + TIMEOUT),
    )


def inactive() -> ScheduledCapacityStatus:
    return after(
        given(target=TargetFound(ACTIVE_VALUE, 4)),
        given(schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE, 4)),
        given(schedule=Resolved(False), target=TargetFound(0, 0)),
    )


def conflicted() -> ScheduledCapacityStatus:
    node = spec_dict(nodeName="worker-3")
    return after(
        given(spec=node, target=TargetFound(ACTIVE_VALUE, 4)),
        given(spec=node, target=TargetFound(ACTIVE_VALUE, 4), machines=(MachineNode("rack", "worker-3"),)),
        given(spec=node, target=TargetFound(0, 0), machines=(MachineNode("rack", "worker-3"),)),
    )


NO_HANDBACK = spec_dict(handback=None)
OLDER = Claim("tenant-a", "office-hours", "pools.example.com/v1beta1", "Pool", "agents",
              "spec.warmReplicas", NOW - timedelta(days=1))
YOUNGER = Claim("tenant-a", "override", "pools.example.com/v1", "Pool", "agents", "spec.warmReplicas",
                NOW)
YIELDS = GovernedBy(OLDER)


def yielded() -> ScheduledCapacityStatus:
    return after(given(target=TargetFound(ACTIVE_VALUE, 4)),
                 given(target=TargetFound(ACTIVE_VALUE, 4), field_standing=YIELDS))
CONFLICT = spec_dict(nodeName="worker-3")
ON_WORKER_3 = (MachineNode("trading-desk-rack", "worker-3"),)


@dataclass(frozen=True)
class Row:
    id: str
    input: Callable[[], DecisionInput]
    write: int | None
    phase: Phase
    conditions: dict[str, tuple[str, str]] = field(default_factory=dict)
    requeue_at: datetime | None = None


T, F, U = "True", "False", "Unknown"

TABLE = [
    # --- the schedule drives the field -------------------------------------------------------
    Row(
        "a fresh object whose schedule is active writes the active value and is Active",
        lambda: given(target=TargetFound(0, 0)),
        ACTIVE_VALUE,
        Phase.ACTIVE,
        {READY: (T, "CapacityActive"), SPOT_SCHEDULE_RESOLVED: (T, "Resolved"),
         TARGET_RESOLVED: (T, "TargetFound"), CAPACITY_WRITTEN: (T, "ValueHeld"),
         HANDBACK_COMPLETE: (F, "CapacityConceded"), HOST_GOVERNANCE_CONFLICT: (F, "NodeNameUnset")},
    ),
    Row(
        "an active value already in place is not written again",
        lambda: given(target=TargetFound(ACTIVE_VALUE, 0), prior=active()),
        None,
        Phase.ACTIVE,
        {READY: (T, "CapacityActive")},
    ),
    Row(
        "an active value someone changed is written back at once and the contest is reported",
        lambda: given(target=TargetFound(3, 0, writer="kustomize-controller"), prior=active()),
        ACTIVE_VALUE,
        Phase.ACTIVE,
        {READY: (T, "CapacityActive"), FIELD_CONTESTED: (T, "RewrittenByAnotherFieldManager")},
        requeue_at=NOW + timedelta(seconds=61),
    ),
    Row(
        "a non-numeric value at the path is overwritten with the active value",
        lambda: given(target=TargetFound("10", 0)),
        ACTIVE_VALUE,
        Phase.ACTIVE,
    ),
    # --- handback ------------------------------------------------------------------------------
    Row(
        "the schedule closing writes 0 and starts the handback with its deadline",
        lambda: given(schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE, 4), prior=active()),
        0,
        Phase.HANDING_BACK,
        {READY: (F, "ScheduleInactive"), CAPACITY_WRITTEN: (T, "ValueHeld"),
         HANDBACK_COMPLETE: (F, "AwaitingZeroWrite")},
        requeue_at=NOW + TIMEOUT,
    ),
    Row(
        "a zero that has landed waits for the drain counter",
        lambda: given(schedule=Resolved(False), target=TargetFound(0, 3), prior=handing_back()),
        None,
        Phase.HANDING_BACK,
        {HANDBACK_COMPLETE: (F, "AwaitingDrain")},
        requeue_at=NOW + TIMEOUT,
    ),
    Row(
        "a missing drain counter is not drained",
        lambda: given(schedule=Resolved(False), target=TargetFound(0, ABSENT), prior=handing_back()),
        None,
        Phase.HANDING_BACK,
        {HANDBACK_COMPLETE: (F, "DrainCounterUnreadable")},
        requeue_at=NOW + TIMEOUT,
    ),
    Row(
        "a drain counter that reads the string '0' is not drained",
        lambda: given(schedule=Resolved(False), target=TargetFound(0, "0"), prior=handing_back()),
        None,
        Phase.HANDING_BACK,
        {HANDBACK_COMPLETE: (F, "DrainCounterUnreadable")},
        requeue_at=NOW + TIMEOUT,
    ),
    Row(
        "a drain counter that reads false is not drained",
        lambda: given(schedule=Resolved(False), target=TargetFound(0, False), prior=handing_back()),
        None,
        Phase.HANDING_BACK,
        {HANDBACK_COMPLETE: (F, "DrainCounterUnreadable")},
        requeue_at=NOW + TIMEOUT,
    ),
    Row(
        "a drain counter reading 0 completes the handback",
        lambda: given(schedule=Resolved(False), target=TargetFound(0, 0), prior=draining()),
        None,
        Phase.INACTIVE,
        {READY: (T, "ScheduleInactive"), HANDBACK_COMPLETE: (T, "Drained")},
    ),
    Row(
        "a counter reading 0 before the zero write lands does not complete the handback",
        lambda: given(schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE, 0), prior=handing_back()),
        0,
        Phase.HANDING_BACK,
        {RECONCILING: (T, "AwaitingZeroWrite"), HANDBACK_COMPLETE: (F, "AwaitingZeroWrite")},
        requeue_at=NOW + timedelta(seconds=61),  # a repair: looked at again after the quiet time
    ),
    Row(
        "the deadline passing first times the handback out and holds 0 without a write",
        lambda: given(schedule=Resolved(False), target=TargetFound(0, 3), prior=draining(), now=NOW + TIMEOUT),
        None,
        Phase.HANDBACK_TIMED_OUT,
        {READY: (F, "ScheduleInactive"), STALLED: (T, "HandbackTimedOut"), CAPACITY_WRITTEN: (T, "ValueHeld"),
         HANDBACK_COMPLETE: (F, "HandbackTimedOut")},
    ),
    Row(
        "a value raised after the timeout is written back to 0 and stays timed out",
        lambda: given(schedule=Resolved(False), target=TargetFound(5, 3), prior=timed_out(), now=NOW + 2 * TIMEOUT),
        0,
        Phase.HANDBACK_TIMED_OUT,
        {HANDBACK_COMPLETE: (F, "HandbackTimedOut"), FIELD_CONTESTED: (T, "RewrittenByAnotherFieldManager")},
        requeue_at=NOW + 2 * TIMEOUT + timedelta(seconds=61),
    ),
    Row(
        "a timed-out handback completes when the counter finally reads 0",
        lambda: given(schedule=Resolved(False), target=TargetFound(0, 0), prior=timed_out(), now=NOW + 2 * TIMEOUT),
        None,
        Phase.INACTIVE,
        {HANDBACK_COMPLETE: (T, "Drained")},
    ),
    Row(
        "the schedule reopening mid-handback writes the active value again",
        lambda: given(schedule=Resolved(True), target=TargetFound(0, 3), prior=draining()),
        ACTIVE_VALUE,
        Phase.ACTIVE,
        {READY: (T, "CapacityActive"), HANDBACK_COMPLETE: (F, "CapacityConceded")},
    ),
    Row(
        "the schedule reopening after a timeout writes the active value again",
        lambda: given(schedule=Resolved(True), target=TargetFound(0, 3), prior=timed_out(), now=NOW + TIMEOUT),
        ACTIVE_VALUE,
        Phase.ACTIVE,
    ),
    Row(
        "without handback the zero write is followed by HandingBack with no deadline",
        lambda: given(spec=NO_HANDBACK, schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE),
                      prior=after(given(spec=NO_HANDBACK, target=TargetFound(ACTIVE_VALUE)))),
        0,
        Phase.HANDING_BACK,
        {HANDBACK_COMPLETE: (F, "AwaitingZeroWrite")},
    ),
    Row(
        "without handback the handback completes as soon as the zero write lands",
        lambda: given(spec=NO_HANDBACK, schedule=Resolved(False), target=TargetFound(0),
                      prior=after(given(spec=NO_HANDBACK, target=TargetFound(ACTIVE_VALUE)),
                                  given(spec=NO_HANDBACK, schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE)))),
        None,
        Phase.INACTIVE,
        {HANDBACK_COMPLETE: (T, "ZeroWritten")},
    ),
    Row(
        "a completed handback whose field is raised again is written back to 0 and stays Inactive",
        lambda: given(schedule=Resolved(False), target=TargetFound(7, 2), prior=inactive(), now=NOW + 2 * TIMEOUT),
        0,
        Phase.INACTIVE,
        {HANDBACK_COMPLETE: (T, "Drained"), FIELD_CONTESTED: (T, "RewrittenByAnotherFieldManager")},
        requeue_at=NOW + 2 * TIMEOUT + timedelta(seconds=61),
    ),
    # --- nothing given, nothing to hand back ----------------------------------------------------
    Row(
        "a fresh object whose schedule is closed and field already 0 is Inactive at once",
        lambda: given(schedule=Resolved(False), target=TargetFound(0, 0)),
        None,
        Phase.INACTIVE,
        {HANDBACK_COMPLETE: (T, "NothingConceded")},
    ),
    Row(
        "a fresh object on a closed schedule and a fresh target writes 0 and is Inactive, no deadline",
        lambda: given(schedule=Resolved(False), target=TargetFound(ABSENT, ABSENT)),
        0,
        Phase.INACTIVE,
        {READY: (T, "ScheduleInactive"), HANDBACK_COMPLETE: (T, "NothingConceded")},
    ),
    Row(
        "nothing given stays Inactive once the zero has landed, without a drain counter",
        lambda: given(schedule=Resolved(False), target=TargetFound(0, ABSENT),
                      prior=after(given(schedule=Resolved(False), target=TargetFound(ABSENT, ABSENT)))),
        None,
        Phase.INACTIVE,
        {HANDBACK_COMPLETE: (T, "NothingConceded")},
    ),
    Row(
        "a fresh object whose field holds capacity someone else gave waits for the drain",
        lambda: given(schedule=Resolved(False), target=TargetFound(5, 3)),
        0,
        Phase.HANDING_BACK,
        {HANDBACK_COMPLETE: (F, "AwaitingZeroWrite")},
        requeue_at=NOW + TIMEOUT,
    ),
    Row(
        "a fresh disabled object on a fresh target is Disabled with nothing to hand back",
        lambda: given(spec=spec_dict(enabled=False), target=TargetFound(ABSENT, ABSENT)),
        0,
        Phase.DISABLED,
        {READY: (T, "Disabled"), HANDBACK_COMPLETE: (T, "NothingConceded")},
    ),
    Row(
        "a handback after the active value was written still waits for the drain",
        lambda: given(schedule=Resolved(False), target=TargetFound(0, ABSENT), prior=active()),
        None,
        Phase.HANDING_BACK,
        {HANDBACK_COMPLETE: (F, "DrainCounterUnreadable")},
        requeue_at=NOW + TIMEOUT,
    ),
    # --- field governance ------------------------------------------------------------------------
    Row(
        "an object whose field an older ScheduledCapacity governs writes nothing and is Error naming it",
        lambda: given(target=TargetFound(0, 0), field_standing=YIELDS),
        None,
        Phase.ERROR,
        {READY: (F, "FieldGovernedByOlderScheduledCapacity"),
         CAPACITY_WRITTEN: (F, "FieldGovernedByOlderScheduledCapacity"),
         FIELD_GOVERNANCE_CONFLICT: (T, "FieldGovernedByOlderScheduledCapacity")},
    ),
    Row(
        "a yielding object writes nothing even with the kill switch set and its field above 0",
        lambda: given(spec=spec_dict(killSwitch=True), target=TargetFound(ACTIVE_VALUE, 4),
                      field_standing=YIELDS),
        None,
        Phase.ERROR,
        {FIELD_GOVERNANCE_CONFLICT: (T, "FieldGovernedByOlderScheduledCapacity")},
    ),
    Row(
        "a yielding object does not hand back what it wrote before the older one appeared",
        lambda: given(schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE, 4), prior=active(),
                      field_standing=YIELDS),
        None,
        Phase.ERROR,
        {READY: (F, "FieldGovernedByOlderScheduledCapacity")},
    ),
    Row(
        "the governor reports the younger ScheduledCapacities it overrules and stays Active",
        lambda: given(target=TargetFound(0, 0), field_standing=Governs((YOUNGER,))),
        ACTIVE_VALUE,
        Phase.ACTIVE,
        {READY: (T, "CapacityActive"),
         FIELD_GOVERNANCE_CONFLICT: (T, "YoungerScheduledCapacitiesIgnored")},
    ),
    Row(
        "a yielding object whose governor is gone takes the field over on its next reconcile",
        lambda: given(target=TargetFound(0, 0), prior=yielded()),
        ACTIVE_VALUE,
        Phase.ACTIVE,
        {READY: (T, "CapacityActive"), FIELD_GOVERNANCE_CONFLICT: (F, "NoOtherScheduledCapacity")},
    ),
    Row(
        "a field taken over above 0 on a closed schedule is handed back with the drain wait",
        lambda: given(schedule=Resolved(False), target=TargetFound(7, 3), prior=yielded()),
        0,
        Phase.HANDING_BACK,
        {HANDBACK_COMPLETE: (F, "AwaitingZeroWrite")},
        requeue_at=NOW + TIMEOUT,
    ),
    # --- host governance -----------------------------------------------------------------------
    Row(
        "a node governed by a ScheduledMachine drives the field to 0 and reports the conflict",
        lambda: given(spec=CONFLICT, target=TargetFound(ACTIVE_VALUE, 4), machines=ON_WORKER_3,
                      prior=after(given(spec=CONFLICT, target=TargetFound(ACTIVE_VALUE, 4)))),
        0,
        Phase.HANDING_BACK,
        {READY: (F, "HostGovernanceConflict"), STALLED: (T, "HostGovernanceConflict"),
         HOST_GOVERNANCE_CONFLICT: (T, "NodeGovernedByScheduledMachine")},
        requeue_at=NOW + TIMEOUT,
    ),
    Row(
        "a conflicted object with an active schedule and a zero field is not given the active value",
        lambda: given(spec=CONFLICT, target=TargetFound(0, 0), machines=ON_WORKER_3),
        None,
        Phase.INACTIVE,
        {HOST_GOVERNANCE_CONFLICT: (T, "NodeGovernedByScheduledMachine")},
    ),
    Row(
        "the conflict going away writes the active value again",
        lambda: given(spec=CONFLICT, target=TargetFound(0, 0), machines=(), prior=conflicted()),
        ACTIVE_VALUE,
        Phase.ACTIVE,
        {HOST_GOVERNANCE_CONFLICT: (F, "NoScheduledMachineOnNode")},
    ),
    Row(
        "machines on other nodes are no conflict",
        lambda: given(spec=CONFLICT, target=TargetFound(0, 0), machines=(MachineNode("rack", "worker-4"),)),
        ACTIVE_VALUE,
        Phase.ACTIVE,
        {HOST_GOVERNANCE_CONFLICT: (F, "NoScheduledMachineOnNode")},
    ),
    Row(
        "an unreadable machine list does not let the active value be written",
        lambda: given(spec=CONFLICT, target=TargetFound(0, 0), machines=LookupFailed("timeout")),
        None,
        Phase.PENDING,
        {READY: (F, "MachineLookupFailed")},
    ),
    Row(
        "an unreadable machine list does not stop a zero write the schedule asks for",
        lambda: given(spec=CONFLICT, schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE, 0),
                      machines=LookupFailed("timeout")),
        0,
        Phase.HANDING_BACK,
        {HOST_GOVERNANCE_CONFLICT: (U, "MachineLookupFailed")},
        requeue_at=NOW + TIMEOUT,
    ),
    # --- provider resolution -------------------------------------------------------------------
    Row(
        "a provider that turns not-Ready holds the last known active state",
        lambda: given(schedule=Unresolved(UnresolvedReason.NOT_READY, "Ready=False"),
                      target=TargetFound(ACTIVE_VALUE, 0), prior=active()),
        None,
        Phase.ACTIVE,
        {READY: (T, "CapacityActive"), SPOT_SCHEDULE_RESOLVED: (F, "ScheduleNotReady")},
    ),
    Row(
        "a provider object that disappears holds the last known inactive state",
        lambda: given(schedule=Unresolved(UnresolvedReason.NOT_FOUND, "gone"),
                      target=TargetFound(0, 0), prior=inactive()),
        None,
        Phase.INACTIVE,
        {SPOT_SCHEDULE_RESOLVED: (F, "ScheduleNotFound")},
    ),
    Row(
        "a provider whose CRD is not installed and never resolved is treated as inactive",
        lambda: given(schedule=Unresolved(UnresolvedReason.CRD_NOT_INSTALLED, "no CRD"),
                      target=TargetFound(ACTIVE_VALUE, 4)),
        0,
        Phase.HANDING_BACK,
        {READY: (F, "ScheduleNeverResolved"), SPOT_SCHEDULE_RESOLVED: (F, "ProviderCRDNotInstalled")},
        requeue_at=NOW + TIMEOUT,
    ),
    Row(
        "a provider without status.active is unresolved",
        lambda: given(schedule=Unresolved(UnresolvedReason.ACTIVE_MISSING, "no active"),
                      target=TargetFound(0, 0)),
        None,
        Phase.INACTIVE,
        {SPOT_SCHEDULE_RESOLVED: (F, "ActiveMissing")},
    ),
    Row(
        "a provider whose status.active is not a bool is unresolved",
        lambda: given(schedule=Unresolved(UnresolvedReason.ACTIVE_NOT_BOOL, "'yes'"),
                      target=TargetFound(ACTIVE_VALUE, 0), prior=active()),
        None,
        Phase.ACTIVE,
        {SPOT_SCHEDULE_RESOLVED: (F, "ActiveNotBool")},
    ),
    Row(
        "a transient provider error on a fresh object writes nothing and stays Pending",
        lambda: given(schedule=LookupFailed("503"), target=TargetFound(ACTIVE_VALUE, 0)),
        None,
        Phase.PENDING,
        {READY: (F, "ScheduleLookupFailed")},
    ),
    # --- enabled and killSwitch ----------------------------------------------------------------
    Row(
        "the kill switch writes 0 at once, skips the drain wait and terminates",
        lambda: given(spec=spec_dict(killSwitch=True), target=TargetFound(ACTIVE_VALUE, 4), prior=active()),
        0,
        Phase.TERMINATED,
        {READY: (T, "KillSwitch"), CAPACITY_WRITTEN: (T, "ValueHeld"),
         HANDBACK_COMPLETE: (F, "HandbackSkipped")},
    ),
    Row(
        "the kill switch wins over an active schedule, enabled=false and a conflict",
        lambda: given(spec=spec_dict(killSwitch=True, enabled=False, nodeName="worker-3"),
                      target=TargetFound(0, 4), machines=ON_WORKER_3),
        None,
        Phase.TERMINATED,
        {READY: (T, "KillSwitch"), HOST_GOVERNANCE_CONFLICT: (T, "NodeGovernedByScheduledMachine")},
    ),
    Row(
        "the kill switch does not wait for a provider that cannot be read",
        lambda: given(spec=spec_dict(killSwitch=True), schedule=LookupFailed("503"),
                      target=TargetFound(ACTIVE_VALUE, 4)),
        0,
        Phase.TERMINATED,
    ),
    Row(
        "the kill switch on a missing target writes nothing and still terminates",
        lambda: given(spec=spec_dict(killSwitch=True), target=TargetNotFound()),
        None,
        Phase.TERMINATED,
        {TARGET_RESOLVED: (F, "TargetNotFound"), CAPACITY_WRITTEN: (F, "TargetNotFound")},
    ),
    Row(
        "enabled=false hands back like a closed schedule, with the drain wait, as Disabled",
        lambda: given(spec=spec_dict(enabled=False), target=TargetFound(ACTIVE_VALUE, 4), prior=active()),
        0,
        Phase.DISABLED,
        {READY: (F, "Disabled"), HANDBACK_COMPLETE: (F, "AwaitingZeroWrite")},
        requeue_at=NOW + TIMEOUT,
    ),
    Row(
        "a disabled object reports its completed handback",
        lambda: given(spec=spec_dict(enabled=False), target=TargetFound(0, 0),
                      prior=after(given(target=TargetFound(ACTIVE_VALUE, 4)),
                                  given(spec=spec_dict(enabled=False), target=TargetFound(ACTIVE_VALUE, 4)))),
        None,
        Phase.DISABLED,
        {READY: (T, "Disabled"), HANDBACK_COMPLETE: (T, "Drained")},
    ),
    Row(
        "a disabled object past its deadline reports the timeout and stays Disabled",
        lambda: given(spec=spec_dict(enabled=False), target=TargetFound(0, 2), now=NOW + TIMEOUT,
                      prior=after(given(target=TargetFound(ACTIVE_VALUE, 4)),
                                  given(spec=spec_dict(enabled=False), target=TargetFound(ACTIVE_VALUE, 4)))),
        None,
        Phase.DISABLED,
        {HANDBACK_COMPLETE: (F, "HandbackTimedOut")},
    ),
    # --- the target ----------------------------------------------------------------------------
    Row(
        "a target that does not exist is reported, never created, and the object stays Pending",
        lambda: given(target=TargetNotFound()),
        None,
        Phase.PENDING,
        {READY: (F, "TargetNotFound"), TARGET_RESOLVED: (F, "TargetNotFound"),
         CAPACITY_WRITTEN: (F, "TargetNotFound"), HANDBACK_COMPLETE: (U, "TargetNotFound")},
    ),
    Row(
        "a target deleted after being written leaves the object Pending",
        lambda: given(target=TargetNotFound(), prior=active()),
        None,
        Phase.PENDING,
        {TARGET_RESOLVED: (F, "TargetNotFound")},
    ),
    # --- refusal -------------------------------------------------------------------------------
    Row(
        "a metadata path admitted by an old CRD is refused with the field-path rule",
        lambda: given(spec=spec_dict(capacity={"path": "metadata.labels", "activeValue": 1})),
        None,
        Phase.ERROR,
        {READY: (F, "CapacityPathRejected"), CAPACITY_WRITTEN: (F, "CapacityPathRejected")},
    ),
    Row(
        "a status path as capacity path is refused",
        lambda: given(spec=spec_dict(capacity={"path": "status.inUse", "activeValue": 1})),
        None,
        Phase.ERROR,
        {READY: (F, "CapacityPathRejected")},
    ),
    Row(
        "a drained path outside status is refused",
        lambda: given(spec=spec_dict(handback={"drainedPath": "spec.inUse", "timeout": "15m"})),
        None,
        Phase.ERROR,
        {READY: (F, "DrainedPathRejected")},
    ),
    Row(
        "a spec without targetRef is refused as invalid",
        lambda: given(spec=spec_dict(targetRef=None)),
        None,
        Phase.ERROR,
        {READY: (F, "InvalidSpec"), SPOT_SCHEDULE_RESOLVED: (U, "NotEvaluated")},
    ),
    Row(
        "a target kind with no allowlist entry is refused",
        lambda: given(allowlist=None),
        None,
        Phase.ERROR,
        {READY: (F, "TargetNotAllowlisted")},
    ),
    Row(
        "an allowlist entry for another kind does not allow this target",
        lambda: given(allowlist=ENTRY.model_copy(update={"kind": "OtherPool"})),
        None,
        Phase.ERROR,
        {READY: (F, "TargetNotAllowlisted")},
    ),
    Row(
        "a path the consumer does not allow is refused",
        lambda: given(spec=spec_dict(capacity={"path": "spec.maxReplicas", "activeValue": 1})),
        None,
        Phase.ERROR,
        {READY: (F, "CapacityPathNotAllowlisted")},
    ),
    Row(
        "an activeValue above the consumer's maximum is refused",
        lambda: given(spec=spec_dict(capacity={"path": "spec.warmReplicas", "activeValue": 17})),
        None,
        Phase.ERROR,
        {READY: (F, "ActiveValueAboveMaximum")},
    ),
    Row(
        "a drained path other than the consumer's counter is refused",
        lambda: given(spec=spec_dict(handback={"drainedPath": "status.busy", "timeout": "15m"})),
        None,
        Phase.ERROR,
        {READY: (F, "DrainedPathNotAllowlisted")},
    ),
    Row(
        "a handback on a consumer without a drain counter is refused",
        lambda: given(allowlist=ENTRY.model_copy(update={"drained_path": None})),
        None,
        Phase.ERROR,
        {READY: (F, "DrainedPathNotAllowlisted")},
    ),
    Row(
        "a refused spec is not written even with the kill switch set",
        lambda: given(spec=spec_dict(killSwitch=True, capacity={"path": "metadata.finalizers", "activeValue": 0}),
                      target=TargetFound(ACTIVE_VALUE, 0)),
        None,
        Phase.ERROR,
        {READY: (F, "CapacityPathRejected")},
    ),
    Row(
        "a refused spec on a previously Active object writes nothing",
        lambda: given(allowlist=None, target=TargetFound(ACTIVE_VALUE, 0), prior=active()),
        None,
        Phase.ERROR,
        {READY: (F, "TargetNotAllowlisted"), TARGET_RESOLVED: (T, "TargetFound")},
    ),
]


@pytest.mark.parametrize("row", TABLE, ids=[row.id for row in TABLE])
def test_decision_table(row: Row) -> None:
    decision = decide(row.input())
    assert decision.write == row.write
    assert decision.status.phase is row.phase
    for type_, (status, reason) in row.conditions.items():
        condition = decision.status.condition(type_)
        assert condition is not None, type_
        assert (condition.status.value, condition.reason) == (status, reason), condition.message
    assert decision.requeue_at == row.requeue_at
    ready = decision.status.condition(READY)
    unsettled = [c.type for c in decision.status.conditions if c.type in (RECONCILING, STALLED)]
    assert ready is not None and (ready.status is ConditionStatus.TRUE) == (not unsettled)
    assert len(unsettled) <= 1
    assert all(c.status is ConditionStatus.TRUE for c in decision.status.conditions if c.type in unsettled)


def test_every_phase_and_condition_type_appears_in_the_table() -> None:
    phases = {row.phase for row in TABLE}
    assert phases == set(Phase)
    assert {type_ for row in TABLE for type_ in row.conditions} == set(CONDITION_TYPES)


def test_a_full_decision_reports_every_condition_in_order_and_no_kstatus_condition_once_settled() -> None:
    decision = decide(given())
    assert tuple(c.type for c in decision.status.conditions) == tuple(
        t for t in CONDITION_TYPES if t not in (RECONCILING, STALLED, FIELD_CONTESTED))
    assert all(c.observed_generation == 1 for c in decision.status.conditions)


def test_the_handback_deadline_is_the_zero_write_plus_the_timeout() -> None:
    later = NOW + timedelta(hours=2)
    decision = decide(given(schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE, 4), prior=active(), now=later))
    assert decision.status.handback_start_time == later
    assert decision.status.handback_deadline == later + TIMEOUT
    assert decision.status.last_write_time == later


def test_a_timeout_changed_mid_handback_moves_the_deadline_from_the_original_start() -> None:
    longer = spec_dict(handback={"drainedPath": "status.inUse", "timeout": "1h30m"})
    decision = decide(given(spec=longer, schedule=Resolved(False), target=TargetFound(0, 3), prior=draining(),
                            now=NOW + TIMEOUT))
    assert decision.status.phase is Phase.HANDING_BACK
    assert decision.status.handback_deadline == NOW + timedelta(minutes=90)


def test_a_rewrite_during_handback_keeps_the_original_deadline() -> None:
    decision = decide(given(schedule=Resolved(False), target=TargetFound(4, 3), prior=draining(),
                            now=NOW + timedelta(minutes=5)))
    assert decision.write == 0
    assert decision.status.handback_deadline == NOW + TIMEOUT


def test_status_fields_report_written_value_counter_and_node() -> None:
    status = decide(given(spec=CONFLICT, schedule=Resolved(False), target=TargetFound(0, 3), prior=handing_back())).status
    assert (status.written_value, status.observed_drained_value, status.governed_node) == (0, 3, "worker-3")
    conflicted_status = decide(given(spec=CONFLICT, target=TargetFound(0, 3), machines=ON_WORKER_3)).status
    assert conflicted_status.governed_node is None


def test_the_held_schedule_state_records_the_last_answer_and_when_it_flipped() -> None:
    status = decide(given(schedule=Unresolved(UnresolvedReason.NOT_READY, "stale"), target=TargetFound(ACTIVE_VALUE, 0),
                          prior=active(), now=NOW + TIMEOUT)).status
    assert status.schedule is not None
    assert (status.schedule.active, status.schedule.resolved, status.schedule.last_transition_time) == (True, False, NOW)


def test_a_transient_target_error_returns_the_prior_status_and_asks_for_a_retry() -> None:
    prior = active()
    decision = decide(given(schedule=Resolved(False), target=LookupFailed("etcd timeout"), prior=prior))
    assert (decision.write, decision.status, decision.transient) == (None, prior, "reading the target: etcd timeout")


def test_a_transient_provider_error_flips_nothing() -> None:
    prior = active()
    decision = decide(given(schedule=LookupFailed("503"), target=TargetFound(ACTIVE_VALUE, 0), prior=prior,
                            now=NOW + TIMEOUT))
    assert decision.write is None
    assert decision.status == prior
    assert status_patch(prior.model_dump(mode="json", by_alias=True, exclude_none=True), decision.status) is None


def test_a_refused_spec_keeps_what_the_controller_last_knew() -> None:
    prior = active()
    status = decide(given(allowlist=None, prior=prior, generation=2)).status
    assert status.written_value == ACTIVE_VALUE
    assert status.observed_generation == 2
    assert status.condition(SPOT_SCHEDULE_RESOLVED) == prior.condition(SPOT_SCHEDULE_RESOLVED)


def test_a_spec_built_without_validation_is_still_path_checked() -> None:
    valid = ScheduledCapacitySpec.model_validate(spec_dict())
    smuggled = valid.model_copy(update={"capacity": Capacity.model_construct(path="metadata.ownerReferences",
                                                                             active_value=1)})
    decision = decide(replace(given(), spec=smuggled))
    assert decision.write is None
    assert decision.status.phase is Phase.ERROR
    ready = decision.status.condition(READY)
    assert ready is not None and ready.reason == "CapacityPathRejected"
    assert "metadata.ownerReferences" in ready.message


def test_refusal_messages_say_what_to_fix() -> None:
    def message(inp: DecisionInput) -> str:
        ready = decide(inp).status.condition(READY)
        assert ready is not None
        return ready.message

    assert "add a CapacityConsumer" in message(given(allowlist=None))
    assert "allowed: spec.pool.size, spec.warmReplicas" in message(
        given(spec=spec_dict(capacity={"path": "spec.maxReplicas", "activeValue": 1}))
    )
    assert "lower it" in message(given(spec=spec_dict(capacity={"path": "spec.warmReplicas", "activeValue": 17})))
    assert "spec.targetRef" in message(given(spec=spec_dict(targetRef=None)))


# --- conditions and the status patch -------------------------------------------------------------


def test_last_transition_time_moves_only_when_the_status_flips() -> None:
    first = decide(given(schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE, 4), prior=active()))
    later = NOW + timedelta(minutes=1)
    second = decide(given(schedule=Resolved(False), target=TargetFound(0, 3), prior=first.status, now=later))
    handback_1 = first.status.condition(HANDBACK_COMPLETE)
    handback_2 = second.status.condition(HANDBACK_COMPLETE)
    assert handback_1 is not None and handback_2 is not None
    assert handback_1.reason != handback_2.reason  # AwaitingZeroWrite -> AwaitingDrain, both False
    assert handback_2.last_transition_time == handback_1.last_transition_time
    third = decide(given(schedule=Resolved(False), target=TargetFound(0, 0), prior=second.status,
                         now=later + timedelta(minutes=1)))
    handback_3 = third.status.condition(HANDBACK_COMPLETE)
    assert handback_3 is not None and handback_3.last_transition_time == later + timedelta(minutes=1)


def test_an_unchanged_world_gives_an_equal_status_and_no_patch() -> None:
    prior = draining()
    decision = decide(given(schedule=Resolved(False), target=TargetFound(0, 3), prior=prior,
                            now=NOW + timedelta(minutes=3)))
    assert decision.write is None
    assert decision.status == prior
    assert decision.events == ()
    raw = prior.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert status_patch(raw, decision.status) is None


def test_the_status_patch_carries_only_changes_and_nulls_cleared_fields() -> None:
    prior = draining()
    decision = decide(given(schedule=Resolved(True), target=TargetFound(0, 3), prior=prior))
    raw = prior.model_dump(mode="json", by_alias=True, exclude_none=True)
    patch = status_patch(raw, decision.status)
    assert patch is not None
    body = patch["status"]
    assert body["phase"] == "Active"
    assert body["writtenValue"] == ACTIVE_VALUE
    assert body["handbackDeadline"] is None and body["handbackStartTime"] is None
    assert body["observedDrainedValue"] is None
    assert "observedGeneration" not in body
    assert "schedule" in body and set(body["schedule"]) <= {"active", "lastTransitionTime"}


def test_the_status_patch_for_a_first_reconcile_is_the_whole_status() -> None:
    decision = decide(given())
    patch = status_patch(None, decision.status)
    assert patch == {"status": decision.status.model_dump(mode="json", by_alias=True, exclude_none=True)}


def test_a_prior_status_in_another_spelling_needs_no_patch() -> None:
    status = active()
    raw = copy.deepcopy(status.model_dump(mode="json", by_alias=True, exclude_none=True))
    raw["lastWriteTime"] = raw["lastWriteTime"].replace("Z", "+00:00")
    assert status_patch(raw, status) is None


def test_target_patch_sets_one_nested_field() -> None:
    assert target_patch("spec.warmReplicas", 10) == {"spec": {"warmReplicas": 10}}
    assert target_patch("spec.pool.size", 0) == {"spec": {"pool": {"size": 0}}}


@pytest.mark.parametrize("path", ["metadata.labels", "status.inUse", "spec", "spec.a[0]", "spec..a"])
def test_target_patch_refuses_paths_outside_the_rule(path: str) -> None:
    with pytest.raises(ValueError, match="refusing"):
        target_patch(path, 0)


@pytest.mark.parametrize("value", [True, -1, 1.5, "10"])
def test_target_patch_refuses_values_that_are_not_counts(value: Any) -> None:
    with pytest.raises(ValueError, match="not a count"):
        target_patch("spec.warmReplicas", value)


# --- events ----------------------------------------------------------------------------------------


def test_a_write_that_changes_the_phase_is_one_event_naming_both() -> None:
    decision = decide(given(spec=spec_dict(enabled=False), target=TargetFound(ACTIVE_VALUE, 4), prior=active()))
    assert [(e.type, e.reason) for e in decision.events] == [("Normal", "Disabled")]
    assert decision.events[0].message.endswith("; wrote 0 to spec.warmReplicas on Pool.pools.example.com "
                                               "tenant-a/agents")


def test_the_schedules_own_round_of_phases_is_no_event() -> None:
    closing = decide(given(schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE, 4), prior=active()))
    assert closing.write == 0 and closing.status.phase is Phase.HANDING_BACK
    assert closing.events == ()
    drained = decide(given(schedule=Resolved(False), target=TargetFound(0, 0), prior=closing.status))
    assert drained.status.phase is Phase.INACTIVE and drained.events == ()
    opening = decide(given(target=TargetFound(0, 0), prior=drained.status))
    assert opening.write == ACTIVE_VALUE and opening.status.phase is Phase.ACTIVE
    assert opening.events == ()


def test_a_first_phase_and_a_way_back_from_trouble_are_events() -> None:
    first = decide(given(schedule=Resolved(False), target=TargetFound(0, 0)))
    assert [(e.type, e.reason) for e in first.events] == [("Normal", "Inactive")]
    timed_out = decide(given(schedule=Resolved(False), target=TargetFound(0, 3), prior=draining(),
                             now=NOW + TIMEOUT))
    assert timed_out.status.phase is Phase.HANDBACK_TIMED_OUT
    recovered = decide(given(schedule=Resolved(False), target=TargetFound(0, 0), prior=timed_out.status,
                             now=NOW + TIMEOUT))
    assert recovered.status.phase is Phase.INACTIVE
    assert ("Normal", "Inactive") in [(e.type, e.reason) for e in recovered.events]


def test_a_write_without_a_phase_change_is_a_capacity_written_event_and_a_rewrite_a_warning() -> None:
    drifted = decide(given(target=TargetFound(3, 4), prior=active()))
    assert drifted.write == ACTIVE_VALUE
    assert [(e.type, e.reason) for e in drifted.events] == [
        ("Normal", "CapacityWritten"), ("Warning", "RewrittenByAnotherFieldManager")]
    assert drifted.ask_writer
    raised = decide(given(target=TargetFound(ACTIVE_VALUE, 4),
                          spec=spec_dict(capacity={"path": "spec.warmReplicas", "activeValue": 11}),
                          prior=active()))
    assert [(e.type, e.reason) for e in raised.events] == [("Normal", "CapacityWritten")]


def test_a_timeout_and_a_conflict_are_warnings() -> None:
    timeout = decide(given(schedule=Resolved(False), target=TargetFound(0, 3), prior=draining(), now=NOW + TIMEOUT))
    assert ("Warning", "HandbackTimedOut") in [(e.type, e.reason) for e in timeout.events]
    conflict = decide(given(spec=CONFLICT, target=TargetFound(ACTIVE_VALUE, 4), machines=ON_WORKER_3,
                            prior=after(given(spec=CONFLICT, target=TargetFound(ACTIVE_VALUE, 4)))))
    assert ("Warning", "NodeGovernedByScheduledMachine") in [(e.type, e.reason) for e in conflict.events]


def test_a_conflict_is_told_to_the_scheduled_machine_too_once_as_it_turns_up() -> None:
    first = decide(given(spec=CONFLICT, target=TargetFound(ACTIVE_VALUE, 4), machines=ON_WORKER_3,
                         prior=after(given(spec=CONFLICT, target=TargetFound(ACTIVE_VALUE, 4)))))
    told = [e for e in first.events if e.machine is not None]
    assert [(e.type, e.machine) for e in told] == [("Warning", "trading-desk-rack")]
    assert "worker-3" in told[0].message and "holds its value at 0" in told[0].message
    again = decide(given(spec=CONFLICT, target=TargetFound(0, 4), machines=ON_WORKER_3,
                         prior=first.status))
    assert not [e for e in again.events if e.machine is not None]


def test_a_naive_clock_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        decide(given(now=datetime(2026, 3, 2, 9, 0)))


# --- observations the shell builds ---------------------------------------------------------------


def test_observe_target_reads_the_two_paths_and_reports_absence() -> None:
    spec = parse_spec(spec_dict())
    assert isinstance(spec, ScheduledCapacitySpec)
    pool = {"spec": {"warmReplicas": 4}, "status": {"inUse": 2}}
    assert observe_target(pool, spec) == TargetFound(4, 2)
    assert observe_target({"spec": {}}, spec) == TargetFound(ABSENT, ABSENT)
    assert observe_target({"spec": {"warmReplicas": {"nested": 1}}, "status": None}, spec) == TargetFound(
        {"nested": 1}, ABSENT
    )
    assert observe_target(None, spec) == TargetNotFound()


def test_observe_machines_keeps_only_machines_that_name_a_node() -> None:
    machines: list[dict[str, Any]] = [
        {"metadata": {"name": "b"}, "status": {"nodeRef": {"name": "worker-3"}}},
        {"metadata": {"name": "a"}, "status": {"nodeRef": {"name": "worker-1"}}},
        {"metadata": {"name": "c"}, "status": {"phase": "Pending"}},
        {"metadata": {"name": "d"}},
        {"metadata": {"name": "e"}, "status": {"nodeRef": {"name": ""}}},
    ]
    assert observe_machines(machines) == (MachineNode("a", "worker-1"), MachineNode("b", "worker-3"))


def test_parse_status_round_trips_and_tolerates_garbage() -> None:
    status = active()
    assert parse_status(status.model_dump(mode="json", by_alias=True, exclude_none=True)) == status
    assert parse_status({"phase": "Exploded"}) is None
    assert parse_status(None) is None
    assert parse_status({}) is None


def test_a_decision_names_the_path_it_writes() -> None:
    decision: Decision = decide(given(target=TargetFound(0, 0)))
    assert decision.write_path == "spec.warmReplicas"
    assert decide(given(target=TargetFound(ACTIVE_VALUE, 0), prior=active())).write_path is None


BUNDLE_CONSUMERS: list[dict[str, Any]] = [
    {"name": "other", "group": "apps", "version": "v1", "kind": "Deployment", "resource": "deployments",
     "capacityPaths": ["spec.replicas"], "drainedPath": None, "maxActiveValue": 3},
    {"name": "agents", "group": "pools.example.com", "version": "v1", "kind": "Pool", "resource": "pools",
     "capacityPaths": ["spec.warmReplicas", "spec.pool.size"], "drainedPath": "status.inUse",
     "maxActiveValue": 16},
]


def bundle_with(consumers: list[dict[str, Any]]) -> Bundle:
    data = json.loads(GOLDEN_BUNDLE.read_text())
    data["consumers"] = consumers
    return parse_bundle(data)


def test_allowlist_entry_finds_the_bundle_consumer_by_group_and_kind() -> None:
    bundle = bundle_with(BUNDLE_CONSUMERS)
    assert bundle.consumer_of_kind("pools.example.com", "Pool") == ENTRY
    assert bundle.consumer_of_kind("apps", "Deployment") == Consumer(
        name="other", group="apps", version="v1", kind="Deployment", resource="deployments",
        capacity_paths=("spec.replicas",), drained_path=None, max_active_value=3,
    )
    assert bundle.consumer_of_kind("pools.example.com", "Deployment") is None
    assert bundle.consumer_of_kind("", "Pool") is None


@pytest.mark.parametrize(
    "broken",
    [{"capacityPaths": "spec.warmReplicas"}, {"maxActiveValue": "16"}, {"drainedPath": 3}, {"resource": None}],
    ids=["paths-not-a-list", "ceiling-not-a-number", "drained-not-a-string", "resource-missing"],
)
def test_a_malformed_bundle_entry_allows_nothing(broken: dict[str, Any]) -> None:
    # The bundle is refused whole (the process does not start), so the entry allows nothing.
    with pytest.raises(BundleError):
        bundle_with([{**BUNDLE_CONSUMERS[1], **broken}])


def test_a_failed_write_changes_only_capacity_written_and_readiness_and_repeats_without_a_patch() -> None:
    prior = active()
    denied = "admission webhook denied the request"
    closing = given(schedule=Resolved(False), target=TargetFound(ACTIVE_VALUE, 4), prior=prior,
                    now=NOW + timedelta(minutes=1))
    failed = write_failed(closing, decide(closing), denied)
    assert failed.phase is Phase.ACTIVE
    ready, stalled = failed.condition(READY), failed.condition(STALLED)
    assert ready is not None and (ready.status, ready.reason) == (ConditionStatus.FALSE, "WriteFailed")
    assert stalled is not None and (stalled.status, stalled.reason) == (ConditionStatus.TRUE, "WriteFailed")
    assert failed.condition(SPOT_SCHEDULE_RESOLVED) == prior.condition(SPOT_SCHEDULE_RESOLVED)
    written = failed.condition(CAPACITY_WRITTEN)
    assert written is not None and (written.status, written.reason) == (ConditionStatus.FALSE, "WriteFailed")
    assert f"writing 0 to spec.warmReplicas failed: {denied}" in written.message

    retry = replace(closing, prior=failed, now=NOW + timedelta(minutes=2))
    again = write_failed(retry, decide(retry), denied)
    assert status_patch(failed.model_dump(mode="json", by_alias=True, exclude_none=True), again) is None

    recovered = decide(retry).status.condition(CAPACITY_WRITTEN)
    assert recovered is not None and recovered.status is ConditionStatus.TRUE
    assert recovered.last_transition_time == NOW + timedelta(minutes=2)


# --- the policies in force now -------------------------------------------------------------------


def test_an_object_the_tightened_policy_denies_is_handed_back_to_0_loudly() -> None:
    from fivespot.controllers.capacity.observations import OutOfPolicy
    from fivespot.policies.admission_eval import Violation

    message = ("fivespot-tenant-limits: spec.capacity.activeValue 8 exceeds the limit 5 of "
               "TenantPolicy agents; set it to at most 5")
    active = after(given(target=TargetFound(ACTIVE_VALUE, 0)))
    decision = decide(given(target=TargetFound(ACTIVE_VALUE, 0), prior=active,
                            policy=OutOfPolicy((Violation("vap", "fivespot-tenant-limits",
                                                          "spec.capacity.activeValue", message),))))
    assert decision.write == 0, "never above what the limits allow: the handback's zero first"
    assert decision.status.phase is Phase.HANDING_BACK
    stalled = decision.status.condition(STALLED)
    assert stalled is not None and stalled.reason == "OutOfPolicy" and message in stalled.message
    assert ("Warning", "OutOfPolicy") in [(e.type, e.reason) for e in decision.events]


def test_a_closed_window_out_of_policy_is_simply_inactive_and_a_failed_policy_lookup_holds() -> None:
    from fivespot.controllers.capacity.observations import OutOfPolicy
    from fivespot.policies.admission_eval import Violation

    closed = decide(given(schedule=Resolved(False), target=TargetFound(0, 0),
                          policy=OutOfPolicy((Violation("vap", "p", None, "denied"),))))
    assert closed.write is None and closed.status.condition(STALLED) is None
    held = decide(given(target=TargetFound(0, 0), policy=LookupFailed("params cache not synced")))
    assert held.write is None and held.transient is not None, "the active value waits for the limits"


def test_an_hpa_scaling_the_field_makes_the_object_write_nothing_and_name_what_to_gate() -> None:
    from fivespot.api.fieldgovernance import OtherWriter, autoscaled_message, target_key

    hpa = OtherWriter("HorizontalPodAutoscaler.autoscaling", "tenant-a", "agents-hpa",
                      target_key("tenant-a", "pools.example.com/v1", "Pool", "agents"), ("spec",),
                      "spec.minReplicas")
    decision = decide(given(target=TargetFound(3, 0), prior=active(), autoscalers=(hpa,)))
    assert decision.write is None and decision.status.phase is Phase.ERROR
    conflict = decision.status.condition(FIELD_GOVERNANCE_CONFLICT)
    assert conflict is not None and conflict.status is ConditionStatus.TRUE
    assert conflict.reason == "FieldScaledByAutoscaler"
    claim = Claim("tenant-a", "agents-capacity", "pools.example.com/v1", "Pool", "agents",
                  "spec.warmReplicas")
    assert conflict.message == autoscaled_message(claim, hpa)
    assert "Gate its spec.minReplicas instead" in conflict.message
    assert ("Warning", "Error") in [(e.type, e.reason) for e in decision.events]
    gone = decide(given(target=TargetFound(3, 0), prior=decision.status))
    assert gone.write == ACTIVE_VALUE and gone.status.phase is Phase.ACTIVE


def test_a_repair_held_back_is_reported_with_its_time_and_made_when_due() -> None:
    from fivespot.api.kinds.scheduled_capacity import ContestState

    prior = active().model_copy(update={"contest": ContestState(
        manager="kustomize-controller", repairs=4, last_repair_time=NOW)})
    early = decide(given(target=TargetFound(1, 0, writer="kustomize-controller"), prior=prior,
                         now=NOW + timedelta(seconds=2)))
    assert early.write is None and early.requeue_at == NOW + timedelta(seconds=5)
    contested = early.status.condition(FIELD_CONTESTED)
    assert contested is not None and "field manager kustomize-controller rewrote spec.warmReplicas" \
        in contested.message and "the next repair waits until 2026-03-02T09:00:05Z" in contested.message
    due = decide(given(target=TargetFound(1, 0, writer="kustomize-controller"), prior=early.status,
                       now=NOW + timedelta(seconds=5)))
    assert due.write == ACTIVE_VALUE and due.status.contest is not None and due.status.contest.repairs == 5
    quiet = decide(given(target=TargetFound(ACTIVE_VALUE, 0), prior=due.status,
                         now=NOW + timedelta(seconds=5 + 61)))
    assert quiet.write is None and quiet.status.contest is None
    assert quiet.status.condition(FIELD_CONTESTED) is None


def test_a_scale_answer_stands_in_for_the_target_as_the_write_left_it() -> None:
    observed: dict[str, Any] = {"metadata": {"name": "web", "resourceVersion": "10", "generation": 3,
                             "labels": {"a": "b"}},
                "spec": {"replicas": 0, "template": {"x": 1}}, "status": {"replicas": 0}}
    answer = {"kind": "Scale", "metadata": {"name": "web", "resourceVersion": "11"},
              "spec": {"replicas": 4}, "status": {"replicas": 0}}
    assert as_scaled(observed, "10", 4, answer) == {
        "metadata": {"name": "web", "resourceVersion": "11", "generation": 4, "labels": {"a": "b"}},
        "spec": {"replicas": 4, "template": {"x": 1}}, "status": {"replicas": 0}}
    assert observed["spec"]["replicas"] == 0, "the cached copy is left as it was"
    same = as_scaled({**observed, "spec": {"replicas": 4}}, "10", 4, answer)
    assert same is not None and same["metadata"]["generation"] == 3, "no change, no new generation"
    assert as_scaled(observed, "9", 4, answer) is None, "not the version the write was made on"
    assert as_scaled(None, "10", 4, answer) is None
    assert as_scaled(observed, "10", 4, {"kind": "Scale"}) is None


def test_a_scale_is_applied_whole_so_the_controller_owns_replicas_at_0_too() -> None:
    assert scale_apply("team-a", "web", 0) == {
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "web", "namespace": "team-a"}, "spec": {"replicas": 0}}
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="not a count"):
            scale_apply("team-a", "web", bad)  # type: ignore[arg-type]
