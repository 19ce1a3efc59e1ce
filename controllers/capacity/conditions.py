"""The condition vocabulary of ScheduledCapacity and the one rule for updating conditions.

Every reason is a constant here so that operators, alerts and tests share one spelling, and
`lastTransitionTime` moves only when a condition's status flips, which is what lets an unchanged
reconcile produce an equal status (and the shell skip the status patch).

Ready, Reconciling and Stalled follow kstatus (fluxcd/cli-utils), which is what Flux `wait` and
health checks and the emitted Argo CD health Lua read: Ready=True when the object is where its
spec and schedule say it should be (capacity conceded, or handed back — a closed window is the
normal, settled state), Reconciling=True while the controller is still getting there (a drain
being awaited, a target that does not exist yet), Stalled=True when it cannot get there without
a person (a refused spec or write, a handback past its timeout, a host governance conflict).
Reconciling and Stalled are "abnormal-true": present only while True, as kstatus recommends.
`settle` is the one place that decides them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from api.kinds.scheduled_capacity import Condition, ConditionStatus

READY: Final = "Ready"
SPOT_SCHEDULE_RESOLVED: Final = "SpotScheduleResolved"
TARGET_RESOLVED: Final = "TargetResolved"
CAPACITY_WRITTEN: Final = "CapacityWritten"
HANDBACK_COMPLETE: Final = "HandbackComplete"
HOST_GOVERNANCE_CONFLICT: Final = "HostGovernanceConflict"
FIELD_GOVERNANCE_CONFLICT: Final = "FieldGovernanceConflict"
RECONCILING: Final = "Reconciling"
STALLED: Final = "Stalled"

CONDITION_TYPES: Final = (
    READY,
    RECONCILING,
    STALLED,
    SPOT_SCHEDULE_RESOLVED,
    TARGET_RESOLVED,
    CAPACITY_WRITTEN,
    HANDBACK_COMPLETE,
    HOST_GOVERNANCE_CONFLICT,
    FIELD_GOVERNANCE_CONFLICT,
)
"""Every condition the controller sets, in the order it reports them."""


class Reason:
    """Condition and event reasons. Each names the cause, so a person knows where to look."""

    # Ready=True and CapacityWritten=True
    CAPACITY_ACTIVE: Final = "CapacityActive"
    VALUE_HELD: Final = "ValueHeld"
    WRITE_FAILED: Final = "WriteFailed"
    # Ready=True when settled, naming the settled state (also ScheduleInactive, Disabled and
    # KillSwitch); Ready=False: why it is not settled (also HostGovernanceConflict, TargetNotFound and
    # the Error reasons below)
    SCHEDULE_INACTIVE: Final = "ScheduleInactive"
    SCHEDULE_NEVER_RESOLVED: Final = "ScheduleNeverResolved"
    DISABLED: Final = "Disabled"
    KILL_SWITCH: Final = "KillSwitch"
    # SpotScheduleResolved
    RESOLVED: Final = "Resolved"
    SCHEDULE_LOOKUP_FAILED: Final = "ScheduleLookupFailed"
    # TargetResolved
    TARGET_FOUND: Final = "TargetFound"
    TARGET_NOT_FOUND: Final = "TargetNotFound"
    TARGET_LOOKUP_FAILED: Final = "TargetLookupFailed"
    # HandbackComplete
    NOT_HANDING_BACK: Final = "CapacityConceded"
    AWAITING_ZERO_WRITE: Final = "AwaitingZeroWrite"
    AWAITING_DRAIN: Final = "AwaitingDrain"
    DRAIN_COUNTER_UNREADABLE: Final = "DrainCounterUnreadable"
    HANDBACK_TIMED_OUT: Final = "HandbackTimedOut"
    DRAINED: Final = "Drained"
    ZERO_WRITTEN: Final = "ZeroWritten"
    HANDBACK_SKIPPED: Final = "HandbackSkipped"
    NOTHING_CONCEDED: Final = "NothingConceded"
    # HostGovernanceConflict
    HOST_GOVERNANCE_CONFLICT: Final = "HostGovernanceConflict"
    NODE_GOVERNED_BY_MACHINE: Final = "NodeGovernedByScheduledMachine"
    NO_CONFLICT: Final = "NoScheduledMachineOnNode"
    NODE_NAME_UNSET: Final = "NodeNameUnset"
    MACHINE_LOOKUP_FAILED: Final = "MachineLookupFailed"
    # FieldGovernanceConflict (one field, one governor: api.fieldgovernance). The loser's reason
    # is also its Ready reason and, with phase Error, says it writes nothing; the message names
    # the governor.
    GOVERNED_BY_OLDER: Final = "FieldGovernedByOlderScheduledCapacity"
    YOUNGER_IGNORED: Final = "YoungerScheduledCapacitiesIgnored"
    SOLE_GOVERNOR: Final = "NoOtherScheduledCapacity"
    # Error: the spec cannot be acted on; nothing is written
    INVALID_SPEC: Final = "InvalidSpec"
    CAPACITY_PATH_REJECTED: Final = "CapacityPathRejected"
    DRAINED_PATH_REJECTED: Final = "DrainedPathRejected"
    TARGET_NOT_ALLOWLISTED: Final = "TargetNotAllowlisted"
    CAPACITY_PATH_NOT_ALLOWLISTED: Final = "CapacityPathNotAllowlisted"
    DRAINED_PATH_NOT_ALLOWLISTED: Final = "DrainedPathNotAllowlisted"
    ACTIVE_VALUE_ABOVE_MAXIMUM: Final = "ActiveValueAboveMaximum"
    # Not evaluated: an earlier failure stopped the reconcile before this condition's input
    NOT_EVALUATED: Final = "NotEvaluated"


@dataclass(frozen=True)
class Observation:
    """A condition's new status, reason and message, before its transition time is known."""

    type: str
    status: ConditionStatus
    reason: str
    message: str
    generation: int | None = None
    """Set only for a condition carried over unrecomputed: the generation it was computed from."""


def true(type_: str, reason: str, message: str) -> Observation:
    return Observation(type_, ConditionStatus.TRUE, reason, message)


def false(type_: str, reason: str, message: str) -> Observation:
    return Observation(type_, ConditionStatus.FALSE, reason, message)


def unknown(type_: str, reason: str, message: str) -> Observation:
    return Observation(type_, ConditionStatus.UNKNOWN, reason, message)


def settle(ready_reason: str, message: str, stalled: Observation | None,
           reconciling: Observation | None) -> tuple[Observation, ...]:
    """Ready and, when one applies, Stalled or Reconciling (Stalled wins): Ready=True exactly
    when neither does. `ready_reason` names the settled state, or why it is not settled."""
    for pending in (stalled, reconciling):
        if pending is not None:
            return (false(READY, ready_reason, message), pending)
    return (true(READY, ready_reason, message),)


def kept(prior: tuple[Condition, ...], fallback: Observation) -> Observation:
    """The prior condition of `fallback.type` unchanged, or `fallback` when there is none."""
    for condition in prior:
        if condition.type == fallback.type:
            return Observation(
                condition.type,
                condition.status,
                condition.reason,
                condition.message,
                condition.observed_generation,
            )
    return fallback


def merge(
    prior: tuple[Condition, ...],
    observations: tuple[Observation, ...],
    now: datetime,
    generation: int,
) -> tuple[Condition, ...]:
    """The new condition list: `lastTransitionTime` is carried over unless the status flipped."""
    by_type = {c.type: c for c in prior}
    merged = []
    for obs in sorted(observations, key=lambda o: _order(o.type)):
        before = by_type.get(obs.type)
        if before is None or before.status != obs.status:
            since = now
        else:
            since = before.last_transition_time
        merged.append(
            Condition(
                type=obs.type,
                status=obs.status,
                reason=obs.reason,
                message=obs.message,
                last_transition_time=since,
                observed_generation=generation if obs.generation is None else obs.generation,
            )
        )
    return tuple(merged)


def _order(type_: str) -> int:
    return CONDITION_TYPES.index(type_) if type_ in CONDITION_TYPES else len(CONDITION_TYPES)
