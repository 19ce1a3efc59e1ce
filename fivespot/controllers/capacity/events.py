"""The Events a capacity decision tells: what a person may want to know, not one per flip.

A market open is every tenant's schedule opening in the same second, and every Event is a POST.
The schedule's own round (Active -> HandingBack -> Inactive -> Active) is in the status (phase,
Ready and its lastTransitionTime, lastWriteTime) and the metrics; a first phase, a phase outside
that round (Error, HandbackTimedOut, Disabled, Terminated, Pending) or a way back from one, a
write that repairs a drifted field, and every trouble condition are Events.
"""

from __future__ import annotations

from typing import Final

from fivespot.api.kinds.scheduled_capacity import (
    Condition,
    ConditionStatus,
    Phase,
    ScheduledCapacitySpec,
    ScheduledCapacityStatus,
)
from fivespot.api.provider_contract import LookupFailed
from fivespot.controllers.capacity import conditions as cond
from fivespot.controllers.capacity import contest
from fivespot.controllers.capacity.conditions import Reason
from fivespot.controllers.capacity.decision import Event, target_name
from fivespot.controllers.capacity.observations import DecisionInput


_SCHEDULE_ROUND: Final = frozenset({Phase.ACTIVE, Phase.HANDING_BACK, Phase.INACTIVE})
"""The phases a schedule moves an object through; a change among them is no Event."""


def decision_events(
    prior: ScheduledCapacityStatus | None,
    status: ScheduledCapacityStatus,
    write: int | None,
    spec: ScheduledCapacitySpec | None,
    inp: DecisionInput,
) -> tuple[Event, ...]:
    """The Events of the move from `prior` to `status` (with `write` sent), as the module
    docstring says which."""
    events: list[Event] = []
    wrote = (f"wrote {write} to {spec.capacity.path} on {target_name(spec, inp)}"
             if write is not None and spec is not None else None)
    changed = prior is None or prior.phase is not status.phase
    routine = prior is not None and {prior.phase, status.phase} <= _SCHEDULE_ROUND
    if changed and not routine:
        ready = status.condition(cond.READY)
        loud = status.phase in (Phase.ERROR, Phase.HANDBACK_TIMED_OUT)
        message = ready.message if ready is not None else status.phase.value
        events.append(
            Event("Warning" if loud else "Normal", status.phase.value,
                  f"{message}; {wrote}" if wrote is not None else message)
        )
    elif wrote is not None and not changed:
        events.append(Event("Normal", "CapacityWritten", wrote))
    before = {c.type: c for c in prior.conditions} if prior is not None else {}
    for condition in status.conditions:
        earlier = before.get(condition.type)
        moved = earlier is None or (earlier.status, earlier.reason) != (
            condition.status,
            condition.reason,
        )
        if moved and _is_trouble(condition):
            events.append(Event("Warning", condition.reason, condition.message))
            if condition.type == cond.HOST_GOVERNANCE_CONFLICT and spec is not None:
                events += _machine_side(spec, inp)
    return tuple(events)


def _machine_side(spec: ScheduledCapacitySpec, inp: DecisionInput) -> list[Event]:
    """The conflict as the ScheduledMachines sharing the node see it (`kubectl describe sm`)."""
    if isinstance(inp.machines, LookupFailed):
        return []
    message = (f"node {spec.node_name} is also named by ScheduledCapacity {inp.namespace}/{inp.name} "
               "(spec.nodeName); a host is governed by a ScheduledMachine or a ScheduledCapacity, "
               "never both: the capacity side holds its value at 0 and this machine follows its "
               "schedule. Point that spec.nodeName elsewhere or unset it")
    return [Event("Warning", Reason.NODE_GOVERNED_BY_MACHINE, message, machine=m.machine)
            for m in sorted(inp.machines, key=lambda m: m.machine) if m.node == spec.node_name]


def _is_trouble(condition: Condition) -> bool:
    """A condition worth a Warning event when it turns up (Ready and Error are covered by phase)."""
    if condition.type in (cond.HOST_GOVERNANCE_CONFLICT, contest.FIELD_CONTESTED):
        return condition.status is ConditionStatus.TRUE
    if condition.type == cond.STALLED and condition.reason == Reason.OUT_OF_POLICY:
        return condition.status is ConditionStatus.TRUE
    return (
        condition.type in (cond.SPOT_SCHEDULE_RESOLVED, cond.TARGET_RESOLVED)
        and condition.status is ConditionStatus.FALSE
    )
