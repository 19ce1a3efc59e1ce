"""`spec.override` on a built-in schedule: "on for the next 3 hours, then back to the schedule".

Every built-in provider kind takes the same `override: {active, until}`. While `now < until` the
published `status.active` is `override.active` whatever the schedule says, `status.overrideUntil`
says until when, and the Ready reason is `Overridden`; from `until` on the schedule's own decision
is published again, as if the override had never been written. All of it is a pure function of
the spec and the instant, so:
- the provider requeues the object at exactly `until` (the decision's `wake_at`), never polls;
- a provider that restarts, fails over or was down at `until` decides the same from the spec: an
  override still in force is kept, one that has passed is handed back on the first reconcile;
- `nextTransitionTime` stays "when `active` next flips": `until` when the schedule says otherwise
  then, else the schedule's own next flip after `until`.

The Events that tell a person the override started and ended are derived from the status written
(`events`): the provider records them only once its status write landed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel

from fivespot.api.kinds.providers import Override, parse_until
from fivespot.controllers.spotschedules.status import READY, Decision, rfc3339

REASON_OVERRIDDEN: Final = "Overridden"
EVENT_STARTED: Final = "OverrideStarted"
EVENT_EXPIRED: Final = "OverrideExpired"
EVENT_CLEARED: Final = "OverrideCleared"

SpecT = TypeVar("SpecT", bound=BaseModel)


@dataclass(frozen=True)
class InForce:
    """An override that holds `active` at `now`, until `until`."""

    active: bool
    until: dt.datetime


Later = tuple[bool, dt.datetime | None] | None
"""The schedule's own decision at the override's expiry: whether it is active then and its next
flip after that; None when it cannot be foretold (a composite whose children would not decide, a
holiday year the library does not know)."""


def in_force(override: Override | None, now: dt.datetime) -> InForce | None:
    """The override if it holds at `now` (strictly before its `until`), else None."""
    if override is None:
        return None
    until = override.expires
    return InForce(override.active, until) if now < until else None


def _state(active: bool) -> str:
    return "active" if active else "inactive"


def overridden(own: Decision, force: InForce, later: Later) -> Decision:
    """What is published while `force` holds, given the schedule's own decision now (`own`) and
    at the expiry (`later`)."""
    if later is None:
        upcoming = None
    else:
        active_then, following = later
        upcoming = force.until if active_then != force.active else following
    alone = _state(own.active) if own.ready else "undecided"
    message = (f"spec.override holds the schedule {_state(force.active)} until "
               f"{rfc3339(force.until)}, then the schedule decides again; the schedule alone is "
               f"{alone} now ({own.reason}: {own.message})")
    # The override answers even where the schedule cannot (a holiday year it does not know): it
    # is Ready, and looked at again at `until` (the wake-up), not at the schedule's own requeue.
    return replace(own, active=force.active, next_transition=upcoming, reason=REASON_OVERRIDDEN,
                   message=message, ready=True, requeue_at=None, override_until=force.until)


def with_override(decide: Callable[[SpecT, dt.datetime], Decision]
                  ) -> Callable[[SpecT, dt.datetime], Decision]:
    """A kind's `decide(spec, now)` with the spec's `override` applied: the schedule's own
    decision now and at the expiry come from `decide` itself, so they are exact."""

    def deciding(spec: SpecT, now: dt.datetime) -> Decision:
        own = decide(spec, now)
        override = getattr(spec, "override", None)
        force = in_force(override if isinstance(override, Override) else None, now)
        if force is None:
            return own
        then = decide(spec, force.until)
        return overridden(own, force, (then.active, then.next_transition) if then.ready else None)

    return deciding


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event to record about the object once its status write landed."""

    type: Literal["Normal", "Warning"]
    reason: str
    note: str


def events(prior_status: Mapping[str, Any] | None, patch: Mapping[str, Any] | None,
           now: dt.datetime) -> list[Event]:
    """The override Events a status write tells: started (a new `overrideUntil`, or the same one
    with the other value), expired (`overrideUntil` gone at or after it), cleared (gone before it:
    the spec's override was removed or moved into the past). Only a valid decision (Ready=True)
    tells any: an invalid spec is its own news."""
    if patch is None:
        return []
    new = patch.get("status")
    if not isinstance(new, Mapping) or not _ready(new):
        return []
    old: Mapping[str, Any] = prior_status if isinstance(prior_status, Mapping) else {}
    before, after = old.get("overrideUntil"), new.get("overrideUntil")
    active = bool(new.get("active"))
    if isinstance(after, str) and (after != before or old.get("active") != active):
        return [Event("Normal", EVENT_STARTED,
                      f"spec.override holds the schedule {_state(active)} until {after}; the "
                      "provider hands back to the schedule then")]
    if isinstance(before, str) and after is None:
        ended = _instant(before)
        if ended is not None and now >= ended:
            return [Event("Normal", EVENT_EXPIRED,
                          f"the override ended at {before}; the schedule decides again and is "
                          f"{_state(active)}")]
        return [Event("Normal", EVENT_CLEARED,
                      f"the override until {before} was removed from spec.override; the schedule "
                      f"decides again and is {_state(active)}")]
    return []


def _ready(status: Mapping[str, Any]) -> bool:
    conditions = status.get("conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") == READY and c.get("status") == "True"
        for c in conditions)


def _instant(text: str) -> dt.datetime | None:
    try:
        return parse_until(text)
    except ValueError:
        return None
