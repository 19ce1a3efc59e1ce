"""The status-condition contract every fivespot kind follows, and the one rule for updating it.

Flux (`wait`, `healthChecks`), `kubectl wait` and the emitted Argo CD health Lua all read a
status the way kstatus (fluxcd/cli-utils) does: `observedGeneration` behind the generation is
InProgress; `Reconciling=True` is InProgress; `Stalled=True` is Failed; `Ready=False` is
InProgress; otherwise Current. So every fivespot controller reports:

- `Ready=True` when the object is where its spec and schedule say it should be — settled — with a
  reason that names the settled state (a closed window, a disabled object and a pulled kill
  switch are settled too: they are the normal state, not a wait);
- `Ready=False` with `Reconciling=True` while the controller is still getting there on its own;
- `Ready=False` with `Stalled=True` when it cannot get there without a person.

`Reconciling` and `Stalled` are "abnormal-true": present only while True, as kstatus recommends.
`settle` is the one place that decides the three; `merge` turns the observations into the
condition list, moving `lastTransitionTime` only when a status flips (so an unchanged reconcile
produces an equal status and the shell can skip the patch) and stamping each condition with the
generation it was computed from. Each controller keeps its own vocabulary of condition types and
reasons next to its decision function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from fivespot.api.kinds.scheduled_capacity import Condition, ConditionStatus

READY: Final = "Ready"
RECONCILING: Final = "Reconciling"
STALLED: Final = "Stalled"
SPOT_SCHEDULE_RESOLVED: Final = "SpotScheduleResolved"
"""Whether a consumer's provider reference resolves (provider contract): ScheduledCapacity and
ScheduledMachine report it alike."""
KSTATUS_TYPES: Final = (READY, RECONCILING, STALLED)
"""The conditions kstatus reads; they come first in every fivespot status."""


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


def settled(reason: str, message: str) -> tuple[Observation, ...]:
    """Ready=True: where the spec and schedule say it should be (`reason` names which state)."""
    return settle(reason, message, None, None)


def working(ready_reason: str, step: str, message: str) -> tuple[Observation, ...]:
    """Ready=False and Reconciling=True: on its way; `step` names what it is doing or awaiting."""
    return settle(ready_reason, message, None, true(RECONCILING, step, message))


def stalled(reason: str, message: str) -> tuple[Observation, ...]:
    """Ready=False and Stalled=True: it cannot get there without a person."""
    return settle(reason, message, true(STALLED, reason, message), None)


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
    order: Sequence[str],
) -> tuple[Condition, ...]:
    """The new condition list, exactly the observed types in `order` (a type not observed, such
    as a Reconciling that no longer applies, is dropped): `lastTransitionTime` is carried over
    unless the status flipped."""
    by_type = {c.type: c for c in prior}

    def rank(obs: Observation) -> int:
        return order.index(obs.type) if obs.type in order else len(order)

    merged = []
    for obs in sorted(observations, key=rank):
        before = by_type.get(obs.type)
        observed = generation if obs.generation is None else obs.generation
        if before is not None and (before.status, before.reason, before.message,
                                   before.observed_generation) == \
                (obs.status, obs.reason, obs.message, observed):
            merged.append(before)  # unchanged: the very condition (frozen), not a validated copy
            continue
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
                observed_generation=observed,
            )
        )
    return tuple(merged)
