"""What a capacity decision is made of, shared by the modules that make it (`decide`, and the
refusal, handback and events it is split into): the Decision the shell acts on, its Events, a
Refusal, the cause that wins, the capacity half, and the few ways a decision words things.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Literal

from fivespot.api.kinds.scheduled_capacity import (
    Phase,
    ScheduledCapacitySpec,
    ScheduledCapacityStatus,
    api_group,
)
from fivespot.controllers.capacity.conditions import Observation, Reason
from fivespot.controllers.capacity.observations import DecisionInput


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event the shell should record on the ScheduledCapacity, or, with `machine`,
    on the ScheduledMachine of that name in its namespace (the other side of a host conflict,
    told from here: the machine identity reads no ScheduledCapacity)."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str
    machine: str | None = None


@dataclass(frozen=True)
class Decision:
    """What the shell must do. `write` is None or exactly 0 or spec.capacity.activeValue."""

    write: int | None
    write_path: str | None
    status: ScheduledCapacityStatus
    requeue_at: datetime | None
    events: tuple[Event, ...]
    transient: str | None = None
    """Set when a lookup failed: nothing was changed; retry with backoff."""
    ask_writer: bool = False
    """The write is a repair (someone rewrote the field) and the target's writer is unknown:
    the shell reads the field's manager (`TargetFound.writer`) and decides again."""


@dataclass(frozen=True)
class Refusal:
    """Why the spec cannot be acted on, phrased as what to fix."""

    reason: str
    message: str


class Cause(Enum):
    """Why the field should hold what it holds; the first that applies wins."""

    KILL_SWITCH = Reason.KILL_SWITCH
    DISABLED = Reason.DISABLED
    CONFLICT = Reason.HOST_GOVERNANCE_CONFLICT
    OUT_OF_POLICY = Reason.OUT_OF_POLICY
    SCHEDULE_NEVER_RESOLVED = Reason.SCHEDULE_NEVER_RESOLVED
    SCHEDULE_INACTIVE = Reason.SCHEDULE_INACTIVE
    SCHEDULE_ACTIVE = Reason.CAPACITY_ACTIVE


@dataclass(frozen=True)
class Capacity:
    """The capacity half of a decision: the write and the status fields it determines."""

    phase: Phase
    write: int | None
    written_value: int | None
    last_write_time: datetime | None
    handback_start_time: datetime | None
    handback_deadline: datetime | None
    observed_drained_value: int | None
    capacity: Observation
    handback: Observation
    summary: str
    requeue_at: datetime | None = None


CAUSE_SENTENCE = {
    Cause.KILL_SWITCH: "spec.killSwitch is set",
    Cause.DISABLED: "spec.enabled is false",
    Cause.CONFLICT: "a ScheduledMachine governs spec.nodeName",
    Cause.OUT_OF_POLICY: "the admission policies in force now deny this object",
    Cause.SCHEDULE_NEVER_RESOLVED: "the schedule has never resolved and is treated as inactive",
    Cause.SCHEDULE_INACTIVE: "the schedule is inactive",
    Cause.SCHEDULE_ACTIVE: "the schedule is active",
}


def prior_write_time(prior: ScheduledCapacityStatus | None) -> datetime | None:
    return prior.last_write_time if prior is not None else None


def target_name(spec: ScheduledCapacitySpec, inp: DecisionInput) -> str:
    group = api_group(spec.target_ref.api_version)
    kind = f"{spec.target_ref.kind}.{group}" if group else spec.target_ref.kind
    return f"{kind} {inp.namespace}/{spec.target_ref.name}"


def stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_second(now: datetime) -> datetime:
    """Status timestamps have second precision, like metav1.Time; naive clocks are refused."""
    if now.tzinfo is None:
        raise ValueError("decide() needs a timezone-aware `now`")
    return now.astimezone(timezone.utc).replace(microsecond=0)
