"""The capacity half of a decision: the active value conceded while the schedule is open, and
the handback to 0 otherwise — zero written first, then the consumer's drain awaited until
`handback.timeout` (HandingBack, HandbackTimedOut, Inactive), latched once complete.

The target's values are read as numbers once, by `observe_target` (`TargetFound.count`,
`TargetFound.drained_count`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from fivespot.api.kinds.scheduled_capacity import (
    INACTIVE_VALUE,
    Condition,
    ConditionStatus,
    Phase,
    ScheduledCapacitySpec,
    ScheduledCapacityStatus,
)
from fivespot.controllers.capacity import conditions as cond
from fivespot.controllers.capacity.conditions import Observation, Reason
from fivespot.controllers.capacity.decision import (
    CAUSE_SENTENCE,
    Capacity,
    Cause,
    bounded,
    prior_write_time,
    stamp,
    target_name,
)
from fivespot.controllers.capacity.observations import ABSENT, DecisionInput, TargetFound


def concede(
    spec: ScheduledCapacitySpec, target: TargetFound, prior: ScheduledCapacityStatus | None, now: datetime
) -> Capacity:
    value = spec.capacity.active_value
    write = None if target.count == value else value
    held = f"{spec.capacity.path} is held at {value}"
    return Capacity(
        phase=Phase.ACTIVE,
        write=write,
        written_value=value,
        last_write_time=now if write is not None else prior_write_time(prior),
        handback_start_time=None,
        handback_deadline=None,
        observed_drained_value=None,
        capacity=cond.true(cond.CAPACITY_WRITTEN, Reason.VALUE_HELD, held),
        handback=cond.false(
            cond.HANDBACK_COMPLETE,
            Reason.NOT_HANDING_BACK,
            "the schedule is open and capacity is conceded; nothing is being handed back",
        ),
        summary=f"the schedule is active; {held}",
    )


def hand_back(
    spec: ScheduledCapacitySpec,
    cause: Cause,
    target: TargetFound,
    prior: ScheduledCapacityStatus | None,
    now: datetime,
) -> Capacity:
    path = spec.capacity.path
    write = None if target.count == INACTIVE_VALUE else INACTIVE_VALUE
    continued = (
        prior
        if prior is not None
        and prior.written_value == INACTIVE_VALUE
        and prior.handback_start_time is not None
        else None
    )
    start = continued.handback_start_time if continued is not None else None
    start = start or now
    if cause is Cause.KILL_SWITCH:
        progress = _Progress(
            phase=Phase.TERMINATED,
            handback=cond.false(
                cond.HANDBACK_COMPLETE,
                Reason.HANDBACK_SKIPPED,
                "killSwitch is set: 0 is written at once and the consumer's drain is not awaited",
            ),
            summary=f"{path} is held at 0",
        )
    elif continued is None and _nothing_given(target, prior):
        progress = _nothing_to_hand_back(spec, target)
        if cause is Cause.DISABLED:
            progress = replace(progress, phase=Phase.DISABLED)
    else:
        progress = _handback_progress(spec, target, continued, start, now)
        if cause is Cause.DISABLED:
            progress = replace(progress, phase=Phase.DISABLED)
    return Capacity(
        phase=progress.phase,
        write=write,
        written_value=INACTIVE_VALUE,
        last_write_time=now if write is not None else prior_write_time(prior),
        handback_start_time=start,
        handback_deadline=progress.deadline,
        observed_drained_value=progress.drained_value,
        capacity=cond.true(cond.CAPACITY_WRITTEN, Reason.VALUE_HELD, f"{path} is held at 0"),
        handback=progress.handback,
        summary=f"{CAUSE_SENTENCE[cause]}; {progress.summary}",
        requeue_at=progress.requeue_at,
    )


def _nothing_given(target: TargetFound, prior: ScheduledCapacityStatus | None) -> bool:
    """Nothing given, nothing to hand back: the field is absent or 0 as this object starts
    governing it, and the object has not held it at the active value since (its last held value
    is none or 0; the handback that follows an Active phase always starts from activeValue).
    The drain wait is for capacity that was above 0."""
    fresh = target.value is ABSENT or target.count == INACTIVE_VALUE
    return fresh and (prior is None or prior.written_value in (None, INACTIVE_VALUE))


def _nothing_to_hand_back(spec: ScheduledCapacitySpec, target: TargetFound) -> _Progress:
    """Inactive as soon as 0 is in place (the status is written only after the zero write has
    landed), with no deadline; latched like any completed handback."""
    path = spec.capacity.path
    found = "absent" if target.value is ABSENT else "0"
    return _Progress(
        phase=Phase.INACTIVE,
        handback=cond.true(
            cond.HANDBACK_COMPLETE,
            Reason.NOTHING_CONCEDED,
            f"{path} was {found} when this object began governing it and the active value was "
            "never written, so there is nothing to hand back and no drain to wait for",
        ),
        summary=f"the handback is complete; {path} is held at 0",
        drained_value=target.drained_count if spec.handback is not None else None,
    )


@dataclass(frozen=True)
class _Progress:
    """Where a handback stands: the phase it implies and what HandbackComplete says."""

    phase: Phase
    handback: Observation
    summary: str
    deadline: datetime | None = None
    drained_value: int | None = None
    requeue_at: datetime | None = None


def _handback_progress(
    spec: ScheduledCapacitySpec,
    target: TargetFound,
    continued: ScheduledCapacityStatus | None,
    start: datetime,
    now: datetime,
) -> _Progress:
    """HandingBack, HandbackTimedOut or Inactive, from the observations and the prior status."""
    done = _complete(spec, target, continued)
    if done is not None:
        return done
    handback = spec.handback
    deadline = start + handback.timeout_delta if handback is not None else None
    if handback is not None and deadline is not None and now >= deadline:
        return _timed_out(spec, target, deadline)
    return _waiting(spec, target, deadline)


def _complete(spec: ScheduledCapacitySpec, target: TargetFound,
              continued: ScheduledCapacityStatus | None) -> _Progress | None:
    """Inactive: a completion latched before, 0 in place with no `handback`, or 0 in place and
    the drain counter at 0; None while the handback is not complete."""
    path = spec.capacity.path
    handback = spec.handback
    complete = continued.condition(cond.HANDBACK_COMPLETE) if continued is not None else None
    if continued is not None and complete is not None and complete.status is ConditionStatus.TRUE:
        return _Progress(
            phase=Phase.INACTIVE,
            handback=_observation(complete),
            summary=f"the handback is complete; {path} is held at 0",
            drained_value=continued.observed_drained_value,
        )
    landed = target.count == INACTIVE_VALUE
    if landed and handback is None:
        return _Progress(
            phase=Phase.INACTIVE,
            handback=cond.true(
                cond.HANDBACK_COMPLETE,
                Reason.ZERO_WRITTEN,
                f"{path} reads 0 and spec.handback is not set, so the handback is complete",
            ),
            summary=f"the handback is complete; {path} is held at 0",
        )
    if landed and handback is not None and target.drained_count == 0:
        return _Progress(
            phase=Phase.INACTIVE,
            handback=cond.true(
                cond.HANDBACK_COMPLETE,
                Reason.DRAINED,
                f"{handback.drained_path} reads 0; the handback is complete",
            ),
            summary=f"the handback is complete; {path} is held at 0",
            drained_value=target.drained_count,
        )
    return None


def _timed_out(spec: ScheduledCapacitySpec, target: TargetFound, deadline: datetime) -> _Progress:
    """HandbackTimedOut: still held at 0, still waiting; nothing is forced."""
    path = spec.capacity.path
    handback = spec.handback
    assert handback is not None
    return _Progress(
        phase=Phase.HANDBACK_TIMED_OUT,
        handback=cond.false(
            cond.HANDBACK_COMPLETE,
            Reason.HANDBACK_TIMED_OUT,
            f"{handback.drained_path} is {_describe_counter(target)} after the "
            f"{handback.timeout} timeout (deadline {stamp(deadline)}); {path} is held at 0 "
            "and nothing is forced. Ask the consumer to finish draining, or raise "
            "spec.handback.timeout",
        ),
        summary=f"the handback timed out at {stamp(deadline)}; {path} is held at 0",
        deadline=deadline,
        drained_value=target.drained_count,
    )


def _waiting(spec: ScheduledCapacitySpec, target: TargetFound,
             deadline: datetime | None) -> _Progress:
    """HandingBack: waiting for the zero write to be observed, or for the drain counter."""
    path = spec.capacity.path
    handback = spec.handback
    drained = target.drained_count if handback is not None else None
    until = f" until {stamp(deadline)}" if deadline is not None else ""
    if target.count != INACTIVE_VALUE:
        waiting = cond.false(
            cond.HANDBACK_COMPLETE,
            Reason.AWAITING_ZERO_WRITE,
            f"0 is written to {path} and has not been observed yet; waiting{until}",
        )
    elif handback is not None and drained is None:
        waiting = cond.false(
            cond.HANDBACK_COMPLETE,
            Reason.DRAIN_COUNTER_UNREADABLE,
            f"{handback.drained_path} is {_describe_counter(target)}; an unread or "
            f"non-numeric counter is not drained; waiting{until}",
        )
    else:
        assert handback is not None  # landed without handback is complete
        waiting = cond.false(
            cond.HANDBACK_COMPLETE,
            Reason.AWAITING_DRAIN,
            f"{handback.drained_path} reads {drained}; waiting for 0{until}",
        )
    return _Progress(
        phase=Phase.HANDING_BACK,
        handback=waiting,
        summary=f"handing back: {waiting.message}",
        deadline=deadline,
        drained_value=drained,
        requeue_at=deadline,
    )


def target_missing(
    spec: ScheduledCapacitySpec, cause: Cause, inp: DecisionInput, prior: ScheduledCapacityStatus | None
) -> Capacity:
    phase = {Cause.KILL_SWITCH: Phase.TERMINATED, Cause.DISABLED: Phase.DISABLED}.get(
        cause, Phase.PENDING
    )
    missing = f"{target_name(spec, inp)} does not exist, so nothing is written"
    return Capacity(
        phase=phase,
        write=None,
        written_value=prior.written_value if prior is not None else None,
        last_write_time=prior_write_time(prior),
        handback_start_time=None,
        handback_deadline=None,
        observed_drained_value=None,
        capacity=cond.false(cond.CAPACITY_WRITTEN, Reason.TARGET_NOT_FOUND, missing),
        handback=cond.unknown(cond.HANDBACK_COMPLETE, Reason.TARGET_NOT_FOUND, missing),
        summary=f"{CAUSE_SENTENCE[cause]}; {missing}",
    )


def _observation(condition: Condition) -> Observation:
    return Observation(condition.type, condition.status, condition.reason, condition.message)


def _describe_counter(target: TargetFound) -> str:
    if target.drained is ABSENT:
        return "missing"
    if target.drained_count is not None:
        return f"still {target.drained_count}"
    return bounded(f"{target.drained!r} (not a number)", 80)
