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
The rule and its helpers (`settle`, `merge`, `kept`) are `fivespot.api.conditions`, shared with the
machine controller; this module holds ScheduledCapacity's vocabulary.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from fivespot.api import conditions
from fivespot.api.conditions import READY as READY
from fivespot.api.conditions import RECONCILING as RECONCILING
from fivespot.api.conditions import SPOT_SCHEDULE_RESOLVED as SPOT_SCHEDULE_RESOLVED
from fivespot.api.conditions import STALLED as STALLED
from fivespot.api.conditions import Observation as Observation
from fivespot.api.conditions import false as false
from fivespot.api.conditions import kept as kept
from fivespot.api.conditions import settle as settle
from fivespot.api.conditions import true as true
from fivespot.api.conditions import unknown as unknown
from fivespot.api.kinds.scheduled_capacity import Condition

TARGET_RESOLVED: Final = "TargetResolved"
CAPACITY_WRITTEN: Final = "CapacityWritten"
HANDBACK_COMPLETE: Final = "HandbackComplete"
HOST_GOVERNANCE_CONFLICT: Final = "HostGovernanceConflict"
FIELD_GOVERNANCE_CONFLICT: Final = "FieldGovernanceConflict"
FIELD_CONTESTED: Final = "FieldContested"
"""Another field manager rewrites the field (`fivespot.controllers.capacity.contest`); present only while
True, like Reconciling and Stalled."""

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
    FIELD_CONTESTED,
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
    OUT_OF_POLICY: Final = "OutOfPolicy"
    """The policies in force now deny the object as stored (a tightened TenantPolicy)."""
    POLICY_LOOKUP_FAILED: Final = "PolicyLookupFailed"
    NO_CONFLICT: Final = "NoScheduledMachineOnNode"
    NODE_NAME_UNSET: Final = "NodeNameUnset"
    MACHINE_LOOKUP_FAILED: Final = "MachineLookupFailed"
    # FieldGovernanceConflict (one field, one governor: api.fieldgovernance). The loser's reason
    # is also its Ready reason and, with phase Error, says it writes nothing; the message names
    # the governor.
    GOVERNED_BY_OLDER: Final = "FieldGovernedByOlderScheduledCapacity"
    YOUNGER_IGNORED: Final = "YoungerScheduledCapacitiesIgnored"
    SOLE_GOVERNOR: Final = "NoOtherScheduledCapacity"
    SCALED_BY_AUTOSCALER: Final = "FieldScaledByAutoscaler"
    """An HPA or a KEDA ScaledObject writes the field: the ScheduledCapacity writes nothing."""
    # FieldContested (present only while True): another field manager rewrote the field
    REWRITTEN: Final = "RewrittenByAnotherFieldManager"
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


def merge(
    prior: tuple[Condition, ...],
    observations: tuple[Observation, ...],
    now: datetime,
    generation: int,
) -> tuple[Condition, ...]:
    """The new condition list in `CONDITION_TYPES` order (`fivespot.api.conditions.merge`)."""
    return conditions.merge(prior, observations, now, generation, CONDITION_TYPES)
