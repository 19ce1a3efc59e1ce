"""The provider contract as a consumer reads it: a provider object's `status` to an observation.

The provider contract (docs/design/contracts/schedule-provider.md): a provider is any CRD in the
provider group whose controller publishes `status.active`.
Every consumer of a provider (the capacity controller, the CompositeSchedule provider, the
ScheduledMachine controller) reads a reference the same way, so the rule lives here once:
- only `status` is read, never the spec;
- `status.active` must be a bool and a `Ready` condition, if present, must be `True`;
- anything else is *unresolved*, with a reason a person can act on (the consumer holds its last
  known state), and "could not look" (a cache not synced, an API error) is `LookupFailed`, which
  flips nothing either.
Pure: the watching and reading is `fivespot.runtime.schedules`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


@dataclass(frozen=True)
class LookupFailed:
    """A transient API error (timeout, 5xx, throttling) or a cache not synced: could not look."""

    message: str


@dataclass(frozen=True)
class Resolved:
    """The provider object exists and its status can be trusted."""

    active: bool


class UnresolvedReason(StrEnum):
    """Why a provider reference does not resolve, per the provider contract."""

    CRD_NOT_INSTALLED = "ProviderCRDNotInstalled"
    NOT_FOUND = "ScheduleNotFound"
    ACTIVE_MISSING = "ActiveMissing"
    ACTIVE_NOT_BOOL = "ActiveNotBool"
    NOT_READY = "ScheduleNotReady"


@dataclass(frozen=True)
class Unresolved:
    """Looked, and the reference does not resolve; `message` says what was seen."""

    reason: UnresolvedReason
    message: str


ScheduleObservation = Resolved | Unresolved | LookupFailed


def observe_schedule(
    provider: Mapping[str, object] | None,
    *,
    crd_installed: bool = True,
    reference: str = "spec.schedule",
) -> Resolved | Unresolved:
    """Apply the provider contract to a provider object as fetched (None on 404).

    Only `status` is read: `status.active` must be a bool, and a `Ready` condition, if present,
    must be True. `reference` is the consumer's field that names the provider, for the message.
    """
    if not crd_installed:
        return Unresolved(
            UnresolvedReason.CRD_NOT_INSTALLED,
            "the provider kind is not served by the API server; install its CRD",
        )
    if provider is None:
        return Unresolved(
            UnresolvedReason.NOT_FOUND,
            f"the provider object does not exist in this namespace; create it or fix {reference}",
        )
    status = provider.get("status")
    status = status if isinstance(status, Mapping) else {}
    if "active" not in status:
        return Unresolved(
            UnresolvedReason.ACTIVE_MISSING,
            "the provider has not published status.active; is its controller running?",
        )
    active = status["active"]
    if not isinstance(active, bool):
        return Unresolved(
            UnresolvedReason.ACTIVE_NOT_BOOL,
            f"the provider's status.active is {active!r}, not a boolean",
        )
    ready = _ready_condition(status.get("conditions"))
    if ready is not None and ready.get("status") != "True":
        return Unresolved(
            UnresolvedReason.NOT_READY,
            f"the provider reports Ready={ready.get('status')!s} "
            f"({ready.get('reason')!s}: {ready.get('message')!s})",
        )
    return Resolved(active)


def _ready_condition(conditions: object) -> Mapping[str, object] | None:
    if not isinstance(conditions, list):
        return None
    for condition in conditions:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition
    return None


def published_next_transition(provider: Mapping[str, object] | None) -> datetime | None:
    """The provider's `status.nextTransitionTime` as an aware instant, if it published a valid
    one (informational in the contract: consumers never act on it, a composite derives its own
    from its children's)."""
    status = provider.get("status") if provider is not None else None
    upcoming = status.get("nextTransitionTime") if isinstance(status, Mapping) else None
    if not isinstance(upcoming, str):
        return None
    try:
        parsed = datetime.fromisoformat(upcoming)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
